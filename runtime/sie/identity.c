// SPDX-License-Identifier: MIT
/*
 * Which binary a process runs: the GNU build id of /proc/PID/exe, compared with the plan's (the
 * SHA-256 of the file when the plan has no build id: a binary linked without one); for a
 * plan of a shared library, the one mapping of a file with the plan's build id, found in
 * /proc/PID/maps (its offset-0 mapping gives the load address).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sie.h"

/* Hex build id of an ELF64 file from its PT_NOTE segments; "" when it has none. */
static int read_build_id(int fd, char *out, size_t outlen)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	uint8_t notes[4096];

	out[0] = 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64)
		return -1;
	for (int i = 0; i < eh.e_phnum; i++) {
		size_t len, off = 0;

		if (pread(fd, &ph, sizeof(ph),
			  (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != sizeof(ph))
			return -1;
		if (ph.p_type != PT_NOTE)
			continue;
		len = ph.p_filesz < sizeof(notes) ? ph.p_filesz : sizeof(notes);
		if (pread(fd, notes, len, (off_t)ph.p_offset) != (ssize_t)len)
			return -1;
		while (off + sizeof(Elf64_Nhdr) <= len) {
			Elf64_Nhdr *n = (Elf64_Nhdr *)(notes + off);
			size_t name = off + sizeof(*n), desc = name + ((n->n_namesz + 3) & ~3u);

			if (desc + n->n_descsz > len)
				break;
			if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
			    !memcmp(notes + name, "GNU", 4) && n->n_descsz * 2 < outlen) {
				for (size_t k = 0; k < n->n_descsz; k++)
					sprintf(out + 2 * k, "%02x", notes[desc + k]);
				return 0;
			}
			off = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 0;
}

/* The file offset of ELF address `vaddr` (from the PT_LOAD that holds it); 0 when none does. */
static off_t file_offset(int fd, const Elf64_Ehdr *eh, uint64_t vaddr)
{
	Elf64_Phdr ph;

	for (int i = 0; i < eh->e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph),
			  (off_t)(eh->e_phoff + (uint64_t)i * eh->e_phentsize)) != sizeof(ph))
			return 0;
		if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return (off_t)(vaddr - ph.p_vaddr + ph.p_offset);
	}
	return 0;
}

/* The DT_SONAME of an ELF64 shared object; "" when it has none. */
static void read_soname(int fd, char *out, size_t outlen)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	Elf64_Dyn dyn[512];
	uint64_t strtab = 0, soname = (uint64_t)-1;
	off_t at;
	ssize_t got;

	out[0] = 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64)
		return;
	for (int i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph),
			  (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != sizeof(ph))
			return;
		if (ph.p_type != PT_DYNAMIC)
			continue;
		got = pread(fd, dyn, ph.p_filesz < sizeof(dyn) ? ph.p_filesz : sizeof(dyn),
			    (off_t)ph.p_offset);
		for (ssize_t k = 0; got > 0 && k < got / (ssize_t)sizeof(dyn[0]); k++) {
			if (dyn[k].d_tag == DT_STRTAB)
				strtab = dyn[k].d_un.d_ptr;
			else if (dyn[k].d_tag == DT_SONAME)
				soname = dyn[k].d_un.d_val;
		}
	}
	if (!strtab || soname == (uint64_t)-1 || !(at = file_offset(fd, &eh, strtab)))
		return;
	got = pread(fd, out, outlen - 1, at + (off_t)soname);
	out[got > 0 ? got : 0] = 0;
}

/* `path` (a mapped file) is the plan's library by name: its file name, a versioned one, or soname.
 */
static int same_library(const char *path, const char *soname, const char *library)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	size_t n = strlen(library);

	return !strcmp(soname, library) ||
	       (!strncmp(base, library, n) && (!base[n] || base[n] == '.'));
}

int sie_find_library(pid_t pid, const struct sie_plan *p, uint64_t *bias, char err[SIE_ERR_LEN])
{
	char path[64], id[129], soname[SIE_PATH_LEN];
	char found[SIE_PATH_LEN] = "", other[SIE_PATH_LEN] = "", other_id[129] = "";
	uint64_t found_start = 0;
	struct sie_mapping m;
	FILE *f = sie_maps_open(pid);

	if (!f) {
		snprintf(err, SIE_ERR_LEN, "pid %d: no such process", pid);
		return -1;
	}
	while (sie_maps_next(f, &m)) {
		uint64_t start = m.start, end = m.end;
		const char *name = m.name;
		int fd;

		if (m.offset != 0 || name[0] != '/')
			continue;
		/* The mapped file itself, even when the path now names another (or no) file. */
		snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", pid, start, end);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fd = open(name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (read_build_id(fd, id, sizeof(id)))
			id[0] = 0;
		read_soname(fd, soname, sizeof(soname));
		close(fd);
		if (!strcmp(id, p->build_id)) {
			if (found[0]) {
				fclose(f);
				snprintf(err, SIE_ERR_LEN,
					 "refused: pid %d has the library %.100s loaded twice "
					 "(%.150s "
					 "at %#lx and %.150s at %#lx): which one to patch is "
					 "ambiguous",
					 pid, p->library, found, found_start, name, start);
				return -1;
			}
			snprintf(found, sizeof(found), "%s", name);
			found_start = start;
		} else if (same_library(name, soname, p->library)) {
			snprintf(other, sizeof(other), "%s", name);
			snprintf(other_id, sizeof(other_id), "%s", id[0] ? id : "(none)");
		}
	}
	fclose(f);
	if (found[0]) {
		*bias = found_start - p->load_vaddr;
		return 0;
	}
	if (other[0])
		snprintf(err, SIE_ERR_LEN,
			 "refused: pid %d has loaded %s (%s) with build id %s, the plan was made "
			 "for "
			 "%s (another build: analyze the loaded library)",
			 pid, p->library, other, other_id, p->build_id);
	else
		snprintf(err, SIE_ERR_LEN,
			 "refused: pid %d has not loaded the library %s (no mapped file has build "
			 "id "
			 "%s)",
			 pid, p->library, p->build_id);
	return -1;
}

int sie_check_identity(pid_t pid, const struct sie_plan *p, uint64_t bias, char err[SIE_ERR_LEN])
{
	char path[64], id[129], sha[65] = "", file[SIE_PATH_LEN];
	int fd, rc;

	if (p->library[0]) {
		uint64_t now;

		/* Found when the bias was; the process is stopped now: it is still there. */
		if (sie_find_library(pid, p, &now, err))
			return -1;
		if (now != bias) {
			snprintf(
				err, SIE_ERR_LEN,
				"refused: pid %d unloaded the library %s while the engine attached "
				"(now at %#lx); retry",
				pid, p->library, now + p->load_vaddr);
			return -1;
		}
		return 0;
	}
	if (!p->build_id[0] && !p->sha256[0]) {
		snprintf(err, SIE_ERR_LEN,
			 "refused: the plan names neither the build id nor the SHA-256 of its "
			 "binary, so which build pid %d runs cannot be checked (write the plan "
			 "with `xtune sie` from the analysis of that binary)",
			 pid);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, SIE_ERR_LEN, "pid %d: %s: %s", pid, path, strerror(errno));
		return -1;
	}
	rc = read_build_id(fd, id, sizeof(id));
	/*
	 * The build id when the plan has one: it names the build and survives strip, which
	 * changes the file's hash. Without one (linked with --build-id=none) the whole file is
	 * the identity: hashed at each arm (not at each set), with the threads stopped.
	 */
	if (!rc && !p->build_id[0] && sie_sha256_fd(fd, sha))
		rc = -1;
	close(fd);
	if (rc) {
		snprintf(err, SIE_ERR_LEN, "pid %d: %s is not a readable ELF64 file", pid, path);
		return -1;
	}
	if (p->build_id[0] && strcmp(id, p->build_id)) {
		snprintf(err, SIE_ERR_LEN,
			 "refused: pid %d runs a binary with build id %s, the plan was made for %s "
			 "(another build: analyze the running binary)",
			 pid, id[0] ? id : "(none)", p->build_id);
		return -1;
	}
	if (!p->build_id[0] && strcmp(sha, p->sha256)) {
		ssize_t n = readlink(path, file, sizeof(file) - 1);

		file[n > 0 ? n : 0] = 0;
		snprintf(err, SIE_ERR_LEN,
			 "refused: pid %d runs %.200s (no build id) with SHA-256 %s, the plan "
			 "was made for a file with SHA-256 %s (another build: analyze the "
			 "running binary)",
			 pid, file[0] ? file : path, sha, p->sha256);
		return -1;
	}
	return 0;
}

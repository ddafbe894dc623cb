// SPDX-License-Identifier: MIT
/* Which binary a process runs: the GNU build id of /proc/PID/exe, compared with the plan's. */
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

int sie_check_identity(pid_t pid, const struct sie_plan *p, char err[SIE_ERR_LEN])
{
	char path[64], id[129];
	int fd, rc;

	if (!p->build_id[0])
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, SIE_ERR_LEN, "pid %d: %s: %s", pid, path, strerror(errno));
		return -1;
	}
	rc = read_build_id(fd, id, sizeof(id));
	close(fd);
	if (rc) {
		snprintf(err, SIE_ERR_LEN, "pid %d: %s is not a readable ELF64 file", pid, path);
		return -1;
	}
	if (strcmp(id, p->build_id)) {
		snprintf(err, SIE_ERR_LEN,
			 "refused: pid %d runs a binary with build id %s, the plan was made for %s "
			 "(another build: analyze the running binary)",
			 pid, id[0] ? id : "(none)", p->build_id);
		return -1;
	}
	return 0;
}

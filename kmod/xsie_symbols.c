// SPDX-License-Identifier: GPL-2.0
/*
 * The kallsyms resolver: addresses and bounds of kernel symbols that are not exported to
 * modules (the functions of critical and safe spans, and a few kernel helpers).
 */
#define pr_fmt(fmt) "xsie: " fmt

#include <linux/kprobes.h>

#include "xsie_internal.h"

/* Neither is exported to modules; both are found once through a probe on the first. */
static unsigned long (*xsie_lookup_name)(const char *name);
static int (*xsie_lookup_size_offset)(unsigned long addr, unsigned long *size,
				      unsigned long *offset);

int xsie_symbols_init(void)
{
	struct kprobe kp = {.symbol_name = "kallsyms_lookup_name"};
	int ret;

	ret = register_kprobe(&kp);
	if (ret) {
		pr_err("cannot locate kallsyms_lookup_name (%d)\n", ret);
		return ret;
	}
	xsie_lookup_name = (void *)kp.addr;
	unregister_kprobe(&kp);
	xsie_lookup_size_offset = (void *)xsie_lookup_name("kallsyms_lookup_size_offset");
	if (!xsie_lookup_size_offset) {
		pr_err("cannot locate kallsyms_lookup_size_offset\n");
		return -ENOENT;
	}
	return 0;
}

/**
 * xsie_func_bounds - start and size of a kernel function, from kallsyms
 * @func: symbol name
 * @start: its address
 * @size: its length in bytes
 *
 * Return: 0, or -ENOENT when @func is not a function start in kallsyms.
 */
int xsie_func_bounds(const char *func, unsigned long *start, unsigned long *size)
{
	unsigned long addr, off;

	addr = xsie_lookup_name(func);
	if (!addr || !xsie_lookup_size_offset(addr, size, &off) || off)
		return -ENOENT;
	*start = addr;
	return 0;
}

/**
 * xsie_entry_past_ftrace - where a function's entry probe goes: past its ftrace call site
 * @start: the function's address
 *
 * A kprobe on the fentry site is an ftrace kprobe: placing or removing it patches the site with
 * a transient int3, and a CPU that runs into that int3 is handed to the kprobe, which has no
 * instruction slot (a single-step from address 0: the 6.1 guest crashed this way under a plug
 * load). The first instruction after the site is reached by every execution just the same.
 * Return: @start + the site's offset + its 5 bytes, or @start when the function has no site.
 */
unsigned long xsie_entry_past_ftrace(unsigned long start)
{
	static unsigned long (*location)(unsigned long ip);
	unsigned long site;

	if (!location)
		location = (void *)xsie_lookup_name("ftrace_location");
	site = location ? location(start) : 0;
	if (site < start || site > start + XSIE_FENTRY_MAX_OFFSET)
		return start;
	return site + XSIE_FENTRY_SIZE;
}

/* The address of a symbol; used for non-exported kernel helpers. */
unsigned long xsie_symbol(const char *name)
{
	return xsie_lookup_name(name);
}

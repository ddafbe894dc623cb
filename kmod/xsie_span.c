// SPDX-License-Identifier: GPL-2.0
/*
 * Critical spans: checking a span against the running kernel (kallsyms bounds, live bytes) and
 * the kprobe handlers that apply the synthesized update to pt_regs.
 */
#define pr_fmt(fmt) "xsie: " fmt

#include <linux/bitops.h>
#include <linux/kprobes.h>
#include <linux/math64.h>
#include <linux/overflow.h>
#include <linux/percpu.h>
#include <linux/ptrace.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "xsie_internal.h"

/* The register a span rewrites, as a slot of pt_regs. */
static unsigned long *xsie_reg(struct pt_regs *regs, u32 reg)
{
	switch (reg) {
	case XSIE_REG_AX:
		return &regs->ax;
	case XSIE_REG_BX:
		return &regs->bx;
	case XSIE_REG_CX:
		return &regs->cx;
	case XSIE_REG_DX:
		return &regs->dx;
	case XSIE_REG_SI:
		return &regs->si;
	case XSIE_REG_DI:
		return &regs->di;
	case XSIE_REG_BP:
		return &regs->bp;
	case XSIE_REG_R8:
		return &regs->r8;
	case XSIE_REG_R9:
		return &regs->r9;
	case XSIE_REG_R10:
		return &regs->r10;
	case XSIE_REG_R11:
		return &regs->r11;
	case XSIE_REG_R12:
		return &regs->r12;
	case XSIE_REG_R13:
		return &regs->r13;
	case XSIE_REG_R14:
		return &regs->r14;
	default:
		return &regs->r15;
	}
}

static s64 xsie_reg_get(unsigned long *r, u32 width)
{
	switch (width) {
	case 8:
		return (s8)*r;
	case 16:
		return (s16)*r;
	case 32:
		return (s32)*r;
	default:
		return (s64)*r;
	}
}

/* Writes keep the architectural rules: a 32-bit write zero-extends, 8- and 16-bit ones merge. */
static void xsie_reg_set(unsigned long *r, u32 width, s64 v)
{
	switch (width) {
	case 8:
		*r = (*r & ~0xffUL) | (u8)v;
		break;
	case 16:
		*r = (*r & ~0xffffUL) | (u16)v;
		break;
	case 32:
		*r = (u32)v;
		break;
	default:
		*r = v;
	}
}

/*
 * CMP spans: the compare is emulated with IV(V) as its immediate. EFLAGS get what `cmp $IV, reg`
 * would leave (the flags of reg - IV at the operand width) and execution resumes after the
 * compare, so every input gives the branch a kernel compiled with V would take.
 */
static void xsie_cmp_flags(struct pt_regs *regs, u64 reg, s64 iv, u32 width)
{
	u64 mask = width == 64 ? ~0ULL : (1ULL << width) - 1;
	u64 x = reg & mask, y = (u64)iv & mask, r = (x - y) & mask;
	u64 sign = 1ULL << (width - 1);
	unsigned long f = regs->flags & ~(X86_EFLAGS_CF | X86_EFLAGS_PF | X86_EFLAGS_AF |
					  X86_EFLAGS_ZF | X86_EFLAGS_SF | X86_EFLAGS_OF);

	if (x < y)
		f |= X86_EFLAGS_CF;
	if (!(hweight8(r & 0xff) & 1))
		f |= X86_EFLAGS_PF;
	if ((x ^ y ^ r) & 0x10)
		f |= X86_EFLAGS_AF;
	if (!r)
		f |= X86_EFLAGS_ZF;
	if (r & sign)
		f |= X86_EFLAGS_SF;
	if ((x ^ y) & (x ^ r) & sign)
		f |= X86_EFLAGS_OF;
	regs->flags = f;
}

/*
 * SHIFT spans: `shl|shr|sar $IV(V0), reg` is emulated with the count IV(V), in [0, width - 1]
 * (the range guarantees it), at the operand width: shr brings in zeros, sar copies the sign bit.
 */
static s64 xsie_shift(u8 op, s64 x, s64 count, u32 width)
{
	u64 mask = width == 64 ? ~0ULL : (1ULL << width) - 1;

	switch (op) {
	case XSIE_SHIFT_SHL:
		return (s64)(((u64)x << count) & mask);
	case XSIE_SHIFT_SHR:
		return (s64)(((u64)x & mask) >> count);
	default:
		return x >> count; /* x sign-extended from width bits (xsie_reg_get) */
	}
}

static int xsie_span_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct xsie_span *s = container_of(p, struct xsie_span, kp);
	struct xsie_const *c = s->c;
	struct xsie_group *g = READ_ONCE(c->group);
	const struct xsie_span_desc *d = &s->d;
	unsigned long *r = xsie_reg(regs, d->reg);
	s64 v, iv, iv0;

	this_cpu_inc(*c->hits);
	if (!g || !READ_ONCE(g->active))
		return 0;
	if (g->mode == XSIE_MODE_PER_THREAD && !xsie_task_in_new_span(g)) {
		this_cpu_inc(*c->old_hits);
		return 0;
	}
	if (c->nspans == 1) {
		/* One read per execution: a store to the value page is a safe change by itself. */
		v = READ_ONCE(xsie_values->value[c->id]);
		if (!xsie_value_valid(c, v))
			v = READ_ONCE(c->in_effect); /* a store not valid is never applied */
		else if (v != READ_ONCE(c->in_effect))
			WRITE_ONCE(c->in_effect, v);
	} else {
		v = READ_ONCE(c->in_effect); /* changed only by a flip (xsie_value_flip) */
	}
	iv = d->a * v + d->b;
	iv0 = d->a * d->v0 + d->b;
	this_cpu_inc(*c->applied);
	switch (d->update) {
	case XSIE_UPD_SET:
		xsie_reg_set(r, d->width, iv);
		break;
	case XSIE_UPD_SCALE:
		xsie_reg_set(r, d->width,
			     div64_s64((xsie_reg_get(r, d->width) + d->pre_add) * iv, iv0) -
				     d->pre_add);
		break;
	case XSIE_UPD_CMP:
		xsie_cmp_flags(regs, *r, iv, d->width);
		/* The bytes of a cmp span are the compare itself: resume after them. */
		instruction_pointer_set(regs, s->func_addr + d->check_offset + d->nbytes);
		return 1; /* no single-step: the compare was emulated */
	case XSIE_UPD_SHIFT:
		xsie_reg_set(r, d->width,
			     xsie_shift(s->shift_op, xsie_reg_get(r, d->width), iv, d->width));
		instruction_pointer_set(regs, s->func_addr + d->check_offset + d->nbytes);
		return 1; /* the shift was emulated */
	}
	return 0;
}

/*
 * Never runs for an applied compare or shift (the pre-handler skips it); its presence keeps
 * kprobes from jump-optimizing such a probe, whose handler must be able to move the instruction
 * pointer.
 */
static void xsie_span_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
}

/* x86 register numbers (ModRM rm + REX.B) as enum xsie_reg; rsp (4) has none. */
static const s8 xsie_x86_reg[16] = {
	XSIE_REG_AX,  XSIE_REG_CX,  XSIE_REG_DX,  XSIE_REG_BX,	-1,	      XSIE_REG_BP,
	XSIE_REG_SI,  XSIE_REG_DI,  XSIE_REG_R8,  XSIE_REG_R9,	XSIE_REG_R10, XSIE_REG_R11,
	XSIE_REG_R12, XSIE_REG_R13, XSIE_REG_R14, XSIE_REG_R15,
};

/*
 * A SHIFT span's bytes must be exactly one `shl|shr|sar $imm8, reg` (C0/C1 /4 /5 /7 ib, or the
 * D0/D1 form with a count of 1) of the span's register and width whose count is IV(V0): the
 * module then knows which shift it emulates without trusting the spans file for it.
 */
static int xsie_shift_decode(struct xsie_span *s)
{
	const struct xsie_span_desc *d = &s->d;
	const u8 *b = d->bytes;
	u32 i = 0, width, n, rm;
	u8 rex = 0, op, modrm;
	s64 count;

	if (b[i] == 0x66)
		i++;
	if ((b[i] & 0xf0) == 0x40)
		rex = b[i++];
	if (i + 2 > d->nbytes)
		return -EINVAL;
	op = b[i];
	modrm = b[i + 1];
	if ((op & 0xfe) != 0xc0 && (op & 0xfe) != 0xd0)
		return -EINVAL;
	n = i + ((op & 0xf0) == 0xc0 ? 3 : 2);
	count = (op & 0xf0) == 0xc0 ? b[i + 2] : 1;
	s->shift_op = (modrm >> 3) & 7;
	rm = (modrm & 7) | (rex & 1) << 3;
	width = !(op & 1) ? 8 : (rex & 8) ? 64 : i && b[0] == 0x66 ? 16 : 32;
	if (n != d->nbytes || modrm >> 6 != 3 ||
	    (s->shift_op != XSIE_SHIFT_SHL && s->shift_op != XSIE_SHIFT_SHR &&
	     s->shift_op != XSIE_SHIFT_SAR) ||
	    (width == 8 && !rex && rm >= 4) /* ah..bh */ || xsie_x86_reg[rm] != (s8)d->reg ||
	    width != d->width || count != d->a * d->v0 + d->b) {
		pr_warn("span refused: %s+%#x (%*phN) is not a shift of %u bits by %lld of the "
			"span's register\n",
			d->func, d->check_offset, d->nbytes, d->bytes, d->width,
			d->a * d->v0 + d->b);
		return -EINVAL;
	}
	return 0;
}

/**
 * xsie_span_load - check a critical span against the running kernel and add it to @c
 * @c: the const (not armed)
 * @d: the span as the scope table describes it
 *
 * Return: 0, -ENOENT (no such function), -ERANGE (span or probe outside the function),
 * -EILSEQ (the live bytes differ: another build, or text already patched), -EINVAL (bad field,
 * or a shift span that is not one shift), -ENOSPC (too many spans).
 */
int xsie_span_load(struct xsie_const *c, const struct xsie_span_desc *d)
{
	struct xsie_span *s;
	unsigned long start, size;
	u8 live[XSIE_MAX_BYTES];
	int ret;

	if (c->nspans >= XSIE_MAX_SPANS)
		return -ENOSPC;
	if (d->update < XSIE_UPD_SET || d->update > XSIE_UPD_SHIFT || d->reg >= XSIE_REG_COUNT ||
	    (d->width != 16 && d->width != 32 && d->width != 64 &&
	     (d->width != 8 || d->update != XSIE_UPD_SHIFT)) ||
	    !d->nbytes || d->nbytes > XSIE_MAX_BYTES)
		return -EINVAL;
	if (d->update == XSIE_UPD_SCALE && d->a * d->v0 + d->b == 0)
		return -EINVAL;
	if ((d->update == XSIE_UPD_CMP || d->update == XSIE_UPD_SHIFT) &&
	    d->probe_offset != d->check_offset)
		return -EINVAL; /* the bytes of these spans are the instruction emulated */
	if (strnlen(d->func, XSIE_SYM_LEN) == XSIE_SYM_LEN)
		return -EINVAL;
	ret = xsie_func_bounds(d->func, &start, &size);
	if (ret) {
		pr_warn("span refused: %s is not a kernel function\n", d->func);
		return ret;
	}
	if ((u64)d->check_offset + d->nbytes > size || d->probe_offset < d->check_offset ||
	    d->probe_offset >= d->check_offset + d->nbytes) {
		pr_warn("span refused: %s+%#x..%#x (probe %#x) outside the function (size %#lx)\n",
			d->func, d->check_offset, d->check_offset + d->nbytes, d->probe_offset,
			size);
		return -ERANGE;
	}
	if (copy_from_kernel_nofault(live, (void *)(start + d->check_offset), d->nbytes))
		return -EFAULT;
	if (memcmp(live, d->bytes, d->nbytes)) {
		pr_warn("span refused: bytes at %s+%#x differ from the scope table (%*phN live)\n",
			d->func, d->check_offset, d->nbytes, live);
		return -EILSEQ;
	}
	s = &c->spans[c->nspans];
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->d = *d;
	s->func_addr = start;
	if (d->update == XSIE_UPD_SHIFT) {
		ret = xsie_shift_decode(s);
		if (ret)
			return ret;
	}
	c->nspans++;
	return 0;
}

/*
 * Whether IV = a*v + b fits a signed register of @width bits (no overflow on the way); for a
 * shift, whether the count is in [0, width - 1] (C leaves larger counts undefined, x86 masks them).
 */
static bool xsie_iv_fits(const struct xsie_span_desc *d, s64 v)
{
	s64 lim = d->width == 64 ? S64_MAX : (1LL << (d->width - 1)) - 1, iv;

	if (check_mul_overflow(d->a, v, &iv) || check_add_overflow(iv, d->b, &iv))
		return false;
	if (d->update == XSIE_UPD_SHIFT)
		return iv >= 0 && iv < d->width;
	return iv >= -lim - 1 && iv <= lim;
}

/**
 * xsie_range_load - set the values @c accepts
 * @c: the const, its spans loaded, not armed
 * @r: the range and constraints from the analysis
 *
 * The compiled value must be valid under them, and at both ends every span's IV must fit its
 * register (IV is affine in V, so then it fits everywhere between).
 * Return: 0, -EINVAL (unknown flags, a negative multiple) or -ERANGE.
 */
int xsie_range_load(struct xsie_const *c, const struct xsie_range *r)
{
	s64 v0 = c->spans[0].d.v0, multiple = r->multiple_of ? r->multiple_of : 1;
	bool power = r->flags & XSIE_RANGE_POWER_OF_TWO;
	u32 i;

	if ((r->flags & ~XSIE_RANGE_POWER_OF_TWO) || multiple < 1) {
		pr_warn("range refused: const %u: flags %#x, multiple of %lld\n", c->id, r->flags,
			r->multiple_of);
		return -EINVAL;
	}
	if (v0 % multiple || (power && (v0 <= 0 || (v0 & (v0 - 1))))) {
		pr_warn("range refused: const %u: the compiled value %lld is not a multiple of "
			"%lld%s\n",
			c->id, v0, multiple, power ? " and a power of two" : "");
		return -ERANGE;
	}
	if (r->min > r->max || r->min > v0 || r->max < v0) {
		pr_warn("range refused: const %u: [%lld, %lld] must hold the compiled value %lld\n",
			c->id, r->min, r->max, c->spans[0].d.v0);
		return -ERANGE;
	}
	for (i = 0; i < c->nspans; i++) {
		const struct xsie_span_desc *d = &c->spans[i].d;

		if (!xsie_iv_fits(d, r->min) || !xsie_iv_fits(d, r->max)) {
			pr_warn("range refused: const %u: %lld*V%+lld overflows %u bits (a shift "
				"count: leaves [0, width - 1]) in [%lld, %lld] (%s+%#x)\n",
				c->id, d->a, d->b, d->width, r->min, r->max, d->func,
				d->probe_offset);
			return -ERANGE;
		}
	}
	c->min = r->min;
	c->max = r->max;
	c->multiple_of = multiple;
	c->power_of_two = power;
	return 0;
}

/**
 * xsie_safe_load - add a safe span (a function and its exit instructions) to @c
 * @c: the const (not armed)
 * @d: the safe span
 *
 * Return: 0, -ENOENT, -ERANGE (an exit outside the function), -EINVAL, -ENOSPC.
 */
int xsie_safe_load(struct xsie_const *c, const struct xsie_safe_desc *d)
{
	struct xsie_safe *ss;
	unsigned long start, size;
	char cold[XSIE_SYM_LEN + 5];
	u32 i, cond = 0;
	u8 op[2];

	if (c->nsafe >= XSIE_MAX_SAFE)
		return -ENOSPC;
	if (!d->nexits || d->nexits > XSIE_MAX_EXITS ||
	    strnlen(d->func, XSIE_SYM_LEN) == XSIE_SYM_LEN)
		return -EINVAL;
	if (xsie_func_bounds(d->func, &start, &size)) {
		pr_warn("safe span refused: %s is not a kernel function\n", d->func);
		return -ENOENT;
	}
	for (i = 0; i < d->nexits; i++) {
		if (!d->exits[i] || d->exits[i] >= size) {
			pr_warn("safe span refused: exit %s+%#x outside the function (size %#lx)\n",
				d->func, d->exits[i], size);
			return -ERANGE;
		}
		if (copy_from_kernel_nofault(op, (void *)(start + d->exits[i]), sizeof(op)))
			return -EFAULT;
		if ((op[0] & 0xf0) == 0x70 || (op[0] == 0x0f && (op[1] & 0xf0) == 0x80))
			cond = d->exits[i] + 1; /* jcc rel8 / jcc rel32 */
	}
	ss = &c->safe[c->nsafe++];
	memset(ss, 0, sizeof(*ss));
	ss->c = c;
	strscpy(ss->func, d->func, sizeof(ss->func));
	ss->start = start;
	ss->end = start + size;
	ss->entry_addr = xsie_entry_past_ftrace(start);
	/* A thread in the out-of-line part is inside the function: the stack scan counts it. */
	snprintf(cold, sizeof(cold), "%s.cold", d->func);
	if (!xsie_func_bounds(cold, &start, &size)) {
		ss->cold_start = start;
		ss->cold_end = start + size;
		pr_info("safe span %s includes %s\n", d->func, cold);
	}
	ss->cond_exit = cond;
	ss->nexits = d->nexits;
	memcpy(ss->exits, d->exits, sizeof(ss->exits));
	return 0;
}

/**
 * xsie_spans_register - place the probes of every critical span of @c
 * @c: the const
 *
 * The handlers do nothing until the const's group is active, so placing them changes nothing.
 * Return: 0 or the first kprobe error (probes already placed are removed again).
 */
int xsie_spans_register(struct xsie_const *c)
{
	u32 i;
	int ret;

	for (i = 0; i < c->nspans; i++) {
		struct xsie_span *s = &c->spans[i];
		u8 live[XSIE_MAX_BYTES];

		/* Checked again: the text may have changed since the span was loaded. */
		if (copy_from_kernel_nofault(live, (void *)(s->func_addr + s->d.check_offset),
					     s->d.nbytes) ||
		    memcmp(live, s->d.bytes, s->d.nbytes)) {
			pr_warn("arm refused: bytes at %s+%#x changed since load\n", s->d.func,
				s->d.check_offset);
			ret = -EILSEQ;
			goto undo;
		}
		memset(&s->kp, 0, sizeof(s->kp));
		s->kp.addr = (kprobe_opcode_t *)(s->func_addr + s->d.probe_offset);
		s->kp.pre_handler = xsie_span_pre;
		if (s->d.update == XSIE_UPD_CMP || s->d.update == XSIE_UPD_SHIFT)
			s->kp.post_handler = xsie_span_post;
		ret = register_kprobe(&s->kp);
		if (ret) {
			pr_warn("kprobe at %s+%#x refused (%d)\n", s->d.func, s->d.probe_offset,
				ret);
			goto undo;
		}
	}
	return 0;
undo:
	while (i--)
		unregister_kprobe(&c->spans[i].kp);
	return ret;
}

void xsie_spans_unregister(struct xsie_const *c)
{
	u32 i;

	for (i = 0; i < c->nspans; i++)
		unregister_kprobe(&c->spans[i].kp);
}

/*
 * Spans whose probe is a jump now (optimization runs asynchronously after registration). The
 * flag is kept on the probe kprobes installed at the address (an aggregate holding ours).
 */
void xsie_span_counts(struct xsie_const *c, u32 *optimized, u32 *int3)
{
	struct kprobe *(*get)(void *addr) = (void *)xsie_symbol("get_kprobe");
	u32 i;

	*optimized = 0;
	*int3 = 0;
	if (c->state < XSIE_TRANSITION || !get)
		return;
	for (i = 0; i < c->nspans; i++) {
		struct kprobe *p;

		preempt_disable();
		p = get(c->spans[i].kp.addr);
		if (p && (p->flags & KPROBE_FLAG_OPTIMIZED))
			(*optimized)++;
		else
			(*int3)++;
		preempt_enable();
	}
}

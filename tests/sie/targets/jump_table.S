/* SPDX-License-Identifier: MIT */
/* A switch compiled by hand: `pick` jumps through a position-independent table of four cases.
   GUARD selects how the index and the table's address reach the jump:
   0  bounded by `cmp $3; ja` in the jump's block (the form compilers emit);
   1  not bounded;
   2  bounded, then changed;
   3  bounded, but the block is also reached by a branch that skips the bound;
   4  the address loaded into a callee-saved register before a loop (hoisted, as gcc does);
   5  as 4, but a path reaches the loop without loading it.
   K is added in case 0, right before case 1 (a table target), and in case 2, before an
   instruction no branch reaches. */
#if GUARD >= 4
#define RET pop %rbx; ret
#define BASE %rbx
#else
#define RET ret
#define BASE %rdx
#endif
	.text
	.globl	pick
	.type	pick, @function
pick:
	mov	%rsi, %rax
#if GUARD >= 4
	push	%rbx
#if GUARD == 5
	test	%rsi, %rsi
	js	.Lagain
#endif
	lea	.Ltable(%rip), %rbx
.Lagain:
#endif
#if GUARD == 3
	test	%rsi, %rsi
	js	.Lload
#endif
#if GUARD != 1
	cmp	$3, %rdi
	ja	.Ldefault
#endif
#if GUARD == 2
	add	%rsi, %rdi
#endif
.Lload:
#if GUARD < 4
	lea	.Ltable(%rip), %rdx
#endif
	movslq	(BASE,%rdi,4), %rcx
	add	BASE, %rcx
	jmp	*%rcx
.Lcase0:
	add	$K, %rax
.Lcase1:
	add	$3, %rax
	RET
.Lcase2:
	add	$K, %rax
	add	$5, %rax
	RET
.Ldefault:
#if GUARD >= 4
	sub	$4, %rdi
	jns	.Lagain
#endif
	xor	%eax, %eax
	RET
	.size	pick, .-pick

	.globl	main
	.type	main, @function
main:
	xor	%eax, %eax
	ret
	.size	main, .-main

	.section .rodata
	.align	4
.Ltable:
	.long	.Lcase0-.Ltable
	.long	.Lcase1-.Ltable
	.long	.Lcase2-.Ltable
	.long	.Ldefault-.Ltable
	.section .note.GNU-stack,"",@progbits

/* SPDX-License-Identifier: MIT */
/* A switch compiled by hand: `pick` jumps through a position-independent table of four cases.
   GUARD selects how the index reaches the table: 0 bounded by `cmp $3; ja` (the form compilers
   emit), 1 not bounded, 2 bounded and then changed, 3 bounded but also reached by a branch that
   skips the bound. K is added in case 0, right before case 1 (a table target), and in case 2,
   before an instruction no branch reaches. */
	.text
	.globl	pick
	.type	pick, @function
pick:
	mov	%rsi, %rax
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
	lea	.Ltable(%rip), %rdx
	movslq	(%rdx,%rdi,4), %rcx
	add	%rdx, %rcx
	jmp	*%rcx
.Lcase0:
	add	$K, %rax
.Lcase1:
	add	$3, %rax
	ret
.Lcase2:
	add	$K, %rax
	add	$5, %rax
	ret
.Ldefault:
	xor	%eax, %eax
	ret
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

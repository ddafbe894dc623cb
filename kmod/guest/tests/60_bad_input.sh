# Bad input is refused with a reason in the kernel log, and changes nothing.
. /xsie/lib.sh
ensure_xsie
line=$(grep '^span .* blk_add_rq_to_plug ' /xsie/spans.txt)
set -- $line # span ID update func check bytes probe reg width a b v0
KERNEL=$(grep '^kernel ' /xsie/spans.txt)
refused() { # refused NAME EXPECTED-LOG LINE: loading LINE (after KERNEL) must fail and log EXPECTED-LOG
	dmesg -c > /dev/null
	printf '%s\n%s\n' "$KERNEL" "$3" > /tmp/bad.txt
	if $XSIECTL load /tmp/bad.txt > /tmp/bad.out 2>&1; then
		fail "$1" "accepted: $3"
		$XSIECTL unload 9 > /dev/null 2>&1
	elif dmesg | grep -q "$2"; then
		pass "$1" "$(cat /tmp/bad.out) / $(dmesg | grep xsie | tail -n 1)"
	else
		fail "$1" "refused without the expected reason: $(cat /tmp/bad.out)"
	fi
}
bytes=$6
other=$(echo "$bytes" | sed 's/^../90/')
refused bad_bytes "differ from the scope table" "span 9 $3 $4 $5 $other $7 $8 $9 ${10} ${11} ${12}"
refused bad_offset "outside the function" "span 9 $3 $4 0x100000 $bytes 0x100002 $8 $9 ${10} ${11} ${12}"
refused bad_probe "outside the function" "span 9 $3 $4 $5 $bytes 0x1 $8 $9 ${10} ${11} ${12}"
refused bad_function "not a kernel function" "span 9 $3 no_such_function_xsie $5 $bytes $7 $8 $9 ${10} ${11} ${12}"
printf '%s\n%s\n' "$KERNEL" "span 9 $3 $4 $5 $bytes $7 $8 $9 ${10} ${11} ${12}" > /tmp/good.txt
$XSIECTL load /tmp/good.txt > /dev/null
refused bad_exit "outside the function" "safe 9 $4 0x100000"
$XSIECTL unload 9
# Spans for another kernel build, or with no kernel named, are refused before any check.
ours=$KERNEL
case "$ours" in "kernel ff"*) KERNEL="kernel 00${ours#kernel ff}" ;; *) KERNEL="kernel ff${ours#kernel ??}" ;; esac
refused bad_kernel_build "another kernel build" "span 9 $3 $4 $5 $bytes $7 $8 $9 ${10} ${11} ${12}"
KERNEL=$ours
dmesg -c > /dev/null
echo "span 9 $3 $4 $5 $bytes $7 $8 $9 ${10} ${11} ${12}" > /tmp/nokernel.txt
if $XSIECTL load /tmp/nokernel.txt > /dev/null 2>&1; then fail bad_no_kernel "accepted spans naming no kernel"
	$XSIECTL unload 9 > /dev/null 2>&1
else check bad_no_kernel "$(dmesg | grep xsie | tail -n 1)" dmesg_has "was not named first"; fi
# A probe inside an instruction: the bytes are right, kprobes refuses the address, nothing armed.
probe=$(printf '0x%x' $(($7 + 1)))
printf '%s\n%s\n' "$KERNEL" "span 9 $3 $4 $5 $bytes $probe $8 $9 ${10} ${11} ${12}" > /tmp/mid.txt
$XSIECTL load /tmp/mid.txt > /dev/null
if $XSIECTL arm 9 immediate 2>/dev/null; then
	fail bad_mid_instruction "armed a probe inside an instruction"
	$XSIECTL disarm 9
else
	check bad_mid_instruction "arm refused, state $($XSIECTL status 9 | field state)" \
		[ "$($XSIECTL status 9 | field state)" = 1 ]
fi
$XSIECTL unload 9
if $XSIECTL arm 9 immediate 2>/dev/null; then fail bad_unloaded "armed an unloaded const"; else
	pass bad_unloaded "arm of an unloaded const refused"; fi

# Helpers for the guest tests (sourced). Results go to the console as marker lines the host parses:
#   XSIE-RESULT <test> PASS|FAIL <detail>      XSIE-METRIC <key> <value>
XSIECTL=/xsie/bin/xsiectl
TRACE=/sys/kernel/tracing

pass() { echo "XSIE-RESULT $1 PASS $2"; }
fail() { echo "XSIE-RESULT $1 FAIL $2"; }
check() { # check NAME DETAIL COND...: PASS when the command COND succeeds
	name=$1 detail=$2
	shift 2
	if "$@"; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
}
metric() { echo "XSIE-METRIC $1 $2"; }
field() { # field KEY <<< "k=v k2=v2": the value of KEY
	tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}
ensure_xsie() { grep -q '^xsie ' /proc/modules || insmod /xsie/modules/xsie.ko; }
const_id() { # the id of a perf-const in the spans file
	sed -n "s/^const \([0-9]*\) $1\$/\1/p" /xsie/spans.txt
}
load_const() { # load the span and safe lines of one const id
	grep -E "^(span|safe) $1 " /xsie/spans.txt > /tmp/const-$1.txt
	$XSIECTL load /tmp/const-$1.txt
}

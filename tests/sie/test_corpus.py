"""The rebuild oracle over the corpus (programs x {gcc, clang} x {-O0, -O2}), and the whole-binary
checks over {gcc, clang} x {-O0, -O2, -O3}: what must be refused is never retuned."""

from __future__ import annotations

import pytest
from xtune import paths
from xtune.sie.analyze import analyze
from xtune.sie.elfcode import ElfCode
from xtune.sie.scope import ScopeError
from xtune.sie.spec import spec_from_dict
from xtune.sie.variants import build_one
from xtune.testing import sie_oracle as oracle


def test_corpus_oracle(engine):
    cases = oracle.run_corpus(workers=2)
    passed = [c for c in cases if c.verdict == "pass"]
    failed = [c for c in cases if c.verdict == "fail"]
    refused = [c for c in cases if c.verdict == "refused"]
    print(f"\nSIE oracle: {len(passed)}/{len(cases)} pass ({len(passed) / len(cases):.1%}),"
          f" {len(refused)} refused, {len(failed)} wrong")  # fmt: skip
    for c in refused:
        print(f"  refused {c.name}: {c.detail[0]}")
    for c in failed:
        print(f"  WRONG {c.name}: {c.detail}")
    assert len({c.program for c in cases}) >= 30
    assert not failed, "retuned binaries must behave exactly like rebuilt ones"
    assert all(c.detail and c.detail[0] for c in refused), "every refusal names its reason"
    # Several allowed values are compared per retuned case, and the probes a table's constraints
    # refuse are refused by the engine (a wrong acceptance is a failure above).
    few = [
        (c.name, c.probes)
        for c in passed
        if len(c.probes) < 2 or set(c.probes) <= set(c.table.consts[0].values)
    ]
    assert not few, f"cases checked with fewer than 2 values, or with analysis values only: {few}"
    # What must be refused: data layout and stack frames that depend on the constant.
    for c in refused:
        if c.program in ("static_table", "stack_array"):
            assert "layout" in c.detail[0] or "frame" in c.detail[0] or "shape" in c.detail[0]
    assert not [c for c in passed if c.program in ("static_table", "stack_array")]
    # Forms that must be handled with both compilers at both levels.
    # or_bits/xor_bits: `or al, 0x80` for V = 128 is `or rax, 0x80` (flags dead); batch_count and
    # ceil_batches: clang's `shr rcx, log2 V` (the count swapped through rcx); scale_odd: gcc expands
    # n * (K + 3) into other shifts and adds for each value, one span computes n * IV.
    musts = ("cmp_lt", "clamp_max", "mul", "add_off", "mask_low", "compare_ge", "inlined_callers")
    # rodata_recip: 1.0 / K in .rodata, read through a span that computes it from V'; store_global:
    # retuned with `persistent = true` (sie_oracle.OPT_IN), the stored K is read back in the call.
    musts += ("rodata_recip", "store_global")
    for prog in (*musts, "or_bits", "xor_bits", "batch_count", "ceil_batches", "scale_odd"):
        assert {c.verdict for c in cases if c.program == prog} == {"pass"}, prog
    expanded = [
        s for c in passed if c.program == "scale_odd" and c.cc == "gcc" for s in c.table.consts[0].spans
    ]
    assert expanded and all("imul" in s.update.text for s in expanded)
    # (signed char)(n + K): gcc's `add eax, -0x80` for V = 128 fits V, since only `al` is read after it.
    assert {c.verdict for c in cases if c.program == "char_width" and c.cc == "gcc"} == {"pass"}
    # clang emits other code for (signed char)(n + 128): 128 is replaced by 96, the range stays below 128.
    for c in cases:
        if c.program == "char_width" and c.cc == "clang" and c.opt != "-O0":
            assert c.verdict == "pass" and c.table.consts[0].max_value < 128, (c.name, c.detail)
            assert any("K=128 gives code of another shape" in n for n in c.table.notes), c.table.notes
    # clang's `used + 7 <= K` loop bound is K / 7 - 1, a multiply-shift in the trampoline.
    budget = [c for c in passed if c.program == "budget" and c.cc == "clang" and c.opt != "-O0"]
    assert len(budget) == 2 and all(s.state.form == "div7" for c in budget for s in c.table.consts[0].spans)
    # gcc's `imul R, X, M mod K; and R32, K - 1`: the multiplier of the largest build (512) serves
    # every power of two up to it.
    hashed = [c for c in passed if c.program == "hash_bucket" and c.cc == "gcc" and c.opt != "-O0"]
    assert len(hashed) == 2
    for c in hashed:
        const = c.table.consts[0]
        assert const.power_of_two and const.max_value == 512, (c.name, const.max_value)
        assert [s.state.b for s in const.spans if s.state.a == 0] == [2654435761 % 512], c.name
    inlined = [c for c in passed if c.program == "inlined_callers" and c.opt == "-O2"]
    assert all(len(c.table.consts[0].spans) >= 2 for c in inlined), "one span per inlined caller"
    # A switch compiled to a jump table: its targets resolved, the spans are jumps.
    switches = [c for c in passed if c.program == "switch_table" and c.opt == "-O2"]
    assert len(switches) == 2
    assert all(s.patch == "jump" for c in switches for s in c.table.consts[0].spans), "jump-table targets"
    assert len(passed) / len(cases) >= oracle.PASS_RATE


def data_words_spec(cc: str, opt: str):
    src = paths.ROOT / "tests" / "sie" / "targets" / "data_words.c"
    data = {"source": src.name, "constant": "K", "values": oracle.VALUES}
    return spec_from_dict({**data, "build": f"{cc} {opt} -o {{out}} {{src}} -lm"}, src.parent / "spec.toml")


def test_data_word_read_retuned(engine):
    """`n < K ? 1e6 * n * (1.0 / K)`: the compare is code, 1/K a `.rodata` double. Each read of the
    double becomes a span computing 1.0 / V' (to nearest, also in a program that rounds upward:
    `targets/data_words.c`); rebuilt and retuned print the same, at every level."""
    for cc, opt in oracle.ALL_LEVELS:
        for c in (
            oracle.case("rodata_recip", cc, opt),
            oracle.Case("data_words", cc, opt, data_words_spec(cc, opt)),
        ):
            oracle.run_case(c)
            assert c.verdict == "pass", (c.name, c.detail)
            reads = [s for s in c.table.consts[0].spans if s.state.form == "f64_div"]
            assert len(reads) == 1 and "1.0 / V" in reads[0].update.text, c.name


def test_data_word_refused():
    """A double that is no c / V nor c * V (1.0 / (K * K + 1)), a float, a double in writable data
    (the program may change it), one in a table read at an index, one whose address is stored in
    data (read through the pointer too; also in an executable that is no PIE), or an object file
    (its readers are relocations) keep the constant refused, naming the data and why."""
    for cc, opt in oracle.ALL_LEVELS:
        for define, section, why in (
            ("-DSQUARE", ".rodata", "neither c / V nor c * V"),
            ("-DSINGLE", ".rodata", "scalar double read"),
            ("-DWRITABLE", ".data", "writable"),
            ("-DINDEXED", ".rodata", "takes an address from which a pointer or index may read the word"),
            ("-DPOINTER", ".rodata", "holds a pointer from which the word may be read"),
            ("-DINDEXED -no-pie", ".rodata", "takes an address from which a pointer or index may read"),
            ("-DPOINTER -no-pie", ".rodata", "holds a pointer from which the word may be read"),
        ):
            const = analyze(data_words_spec(cc, f"{opt} {define}")).consts[0]
            assert not const.tunable, (cc, opt, define)
            assert any(
                f"also lives in data ({section})" in r.reason and why in r.detail for r in const.refusals
            ), (
                cc,
                opt,
                define,
                const.refusals,
            )
    obj = analyze(oracle.make_spec(oracle.CORPUS / "rodata_recip.c", "gcc", "-O2 -c"))
    assert [r.function for r in obj.consts[0].refusals] == [".rodata.cst8+0xe"]
    assert "an object file" in obj.consts[0].refusals[0].detail


def test_relocated_data_masked():
    """A table of function pointers: its bytes are relocations (they move with the code), masked,
    so the constant in the code is still retuned."""
    for cc, opt in oracle.ALL_LEVELS:
        c = oracle.case("fn_table", cc, opt)
        table = ElfCode(build_one(c.spec, oracle.VALUES[0])).data_sections[".data.rel.ro"]
        assert set(range(16)) <= table.relocs, c.name
        assert oracle.run_case(c).verdict == "pass", (c.name, c.detail)


def test_value_outliving_the_span_refused():
    """`malloc(K * 8)` and stores of K-derived values to the heap: refused unless the spec opts in."""
    for cc, opt in oracle.ALL_LEVELS:
        c = oracle.run_case(oracle.case("alloc_size", cc, opt))
        assert c.verdict == "refused", c.name
        assert any("passed to a callee" in d and "old value" in d for d in c.detail), (c.name, c.detail)
    opted = analyze(oracle.make_spec(oracle.CORPUS / "alloc_size.c", "gcc", "-O0", persistent=True))
    assert not [r for r in opted.consts[0].refusals if "old value" in r.reason]
    widened = [s for s in opted.consts[0].spans if "passed to a callee" in s.safe_reason]
    assert widened and all(s.safe_reason.endswith("whole function") for s in widened)


def test_functions_filter_lists_the_others():
    c = oracle.run_case(oracle.case("cmp_lt", "gcc", "-O2", functions="^main$"))
    assert c.verdict == "refused"
    assert c.detail[0].startswith("compute: the code depends on the constant outside the `functions` filter")
    recip = analyze(oracle.case("rodata_recip", "gcc", "-O2", functions="^main$").spec).consts[0]
    assert any("data word is read outside the `functions` filter" in r.reason for r in recip.refusals)


def test_divisibility_found_by_a_coprime_build(engine):
    """gcc -O2 vectorizes `for (i < K)` without a remainder loop when K is a multiple of the width:
    the coprime validation build differs, the odd multiple of the gcd does not."""
    c = oracle.run_case(oracle.case("vector_sum", "gcc", "-O2"))
    const = c.table.consts[0]
    assert (const.multiple_of, const.power_of_two) == (32, False), c.table.notes
    assert c.verdict == "pass", c.detail
    with pytest.raises(ScopeError, match="not a multiple of 32"):
        const.check_value(97)
    # The oracle checked several multiples of 32 no analysis value is, and the engine refused the
    # probe values that are none.
    assert len(c.probes) >= oracle.MIN_PROBES and len(set(c.probes) - set(const.values)) >= 2, c.probes
    assert c.refused_values == [48, 100, 16, 5, 257], c.refused_values


def test_multiple_of_found_by_residue(engine):
    """gcc -O3 vectorizes `for (i < K)` by 4 with a remainder for K mod 4: K = 128, 100, 200 give one
    shape, the coprime and odd-gcd validation builds another; the multiples of 4 near the values,
    validated with an odd multiple of 4 not analyzed, make V a multiple of 4. Retuned to multiples of
    4 no build used it prints what the rebuilds print; other values are refused by the engine."""
    spec = oracle.make_spec(oracle.CORPUS / "vector_sum.c", "gcc", "-O3", [128, 100, 200])
    c = oracle.run_case(oracle.Case("vector_sum", "gcc", "-O3", spec))
    const = c.table.consts[0]
    assert (const.multiple_of, const.power_of_two) == (4, False), c.table.notes
    assert any("factor of 4" in n and "validated with" in n for n in c.table.notes), c.table.notes
    assert c.verdict == "pass", c.detail
    assert len(set(c.probes) - set(const.values)) >= 2, c.probes
    # 100 and 256 of the PROBES are allowed; 101 is inside the range, no multiple of 4.
    assert (c.probes[:2], c.refused_values) == ([100, 256], [48, 16, 5, 101]), (c.probes, c.refused_values)
    with pytest.raises(ScopeError, match="not a multiple of 4"):
        const.check_value(const.min_value + 2)
    # 126 and 190 themselves have other shapes (no halfway substitute has the original's): the
    # multiples of 4 nearest to them in the range, 132 and 188, are analyzed instead.
    spec = oracle.make_spec(oracle.CORPUS / "vector_sum.c", "gcc", "-O3", [128, 126, 190])
    c = oracle.run_case(oracle.Case("vector_sum", "gcc", "-O3", spec))
    const = c.table.consts[0]
    assert (const.values, const.multiple_of) == ([128, 132, 188], 4), c.table.notes
    assert c.verdict == "pass" and len(set(c.probes) - {128, 132, 188}) >= 2, (c.detail, c.probes)


def test_fully_unrolled_loop_refused():
    """A loop the compiler copies once per iteration (clang -O2, gcc -O3 at K = 64) has code of its
    own for every K: no factor's multiples share the shape, and the refusal says why, with the
    instruction counts the builds showed."""
    for cc, opt in (("clang", "-O2"), ("gcc", "-O3")):
        const = analyze(oracle.case("vector_sum", cc, opt).spec).consts[0]
        unrolled = [r for r in const.refusals if r.function == "compute"]
        assert not const.tunable and unrolled, (cc, opt)
        assert "fully unrolled" in unrolled[0].reason, unrolled[0]
        assert "K=32: " in unrolled[0].detail and "tried multiples of 4" in unrolled[0].detail
        # Every K has its own code: the band with the original's shape is too narrow to fit.
        assert "too narrow to fit" in unrolled[0].detail, unrolled[0].detail


def test_span_groups(engine):
    """One group per function of the constant; every span has its range."""
    c = oracle.run_case(oracle.case("inlined_callers", "gcc", "-O2"))
    const = c.table.consts[0]
    by_fn = {s.function: s.group for s in const.spans}
    assert len(set(by_fn.values())) == len(by_fn) >= 2
    assert all(s.group == by_fn[s.function] for s in const.spans)
    assert const.min_value is not None and const.max_value is not None


def test_corpus_oracle_int3_fallback(engine):
    """The same oracle with every span patched by int3 and served by `xsie-user serve`."""
    cases = oracle.run_corpus(workers=2, force_int3=True, only=("gcc", "-O2"))
    passed = [c for c in cases if c.verdict == "pass"]
    failed = [c for c in cases if c.verdict == "fail"]
    print(f"\nSIE oracle (int3 fallback, gcc -O2): {len(passed)}/{len(cases)} pass")
    assert not failed, [(c.name, c.detail) for c in failed]
    assert len(passed) >= 20

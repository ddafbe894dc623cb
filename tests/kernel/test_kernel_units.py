"""The units that use a kernel perf-const: the lexer's attribution of each use, the discovery on
a small tree (headers, includes, modules, refusals), and on Debian's 6.1 tree (host only, no
guest: kbuild's dry run and a word search over the prepared source)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from xtune.sie.kernel import analyze as kernel
from xtune.sie.kernel import ctokens
from xtune.sie.kernel.defines import find_define
from xtune.sie.kernel.kbuild import Unit, parse_dry_run
from xtune.sie.kernel.source import Define, KernelEnv, define_line
from xtune.sie.kernel.units import Discovery, discover, discover_units

HEADER = """
#define LIMIT 32 /* LIMIT in a comment is no use */
#define TWICE(x) ((x) * LIMIT)
struct holder { int slots[LIMIT]; };
static inline int over(int n)
{
	return n > TWICE(1);
}
int plain(void);
PAGEMAKER(Locked) static inline __attribute__((pure)) int under(int n) __must_hold(x)
{
	const char *s = "LIMIT";
	return n < LIMIT;
}
#if LIMIT > 16
#endif
#ifdef LIMIT
#endif
"""


def test_each_use_is_attributed_to_its_macro_function_or_declaration() -> None:
    found = {(u.line, u.name, u.kind, u.owner) for u in ctokens.uses(HEADER, {"LIMIT", "TWICE", "over"})}
    assert found == {
        (3, "LIMIT", "macro", "TWICE"),
        (4, "LIMIT", "declaration", ""),
        (5, "over", "signature", ""),
        (7, "TWICE", "static-function", "over"),
        (13, "LIMIT", "static-function", "under"),
        (15, "LIMIT", "if", ""),
    }
    split = "#ifdef A\nstatic int f(int a) {\n#else\nstatic int f(void) {\n#endif\nreturn LIMIT; }\nint g;\n"
    assert [(u.kind, u.owner) for u in ctokens.uses(split, {"LIMIT"})] == [("static-function", "f")]
    assert ctokens.uses("int f(void) { return LIMIT;\n", {"LIMIT"})[-1].kind == "unbalanced"
    asm = ctokens.uses("\tmov $LIMIT, %eax\n# LIMIT\n", {"LIMIT"}, assembly=True)
    assert [u.kind for u in asm] == ["code"]


def write_tree(root: Path, files: dict[str, str]) -> list[str]:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return sorted(files)


def test_header_closure_reaches_units_anywhere_and_only_compiled_ones(tmp_path: Path) -> None:
    """LIMIT (include/a.h) → macro TWICE → inline over() in another header → called by
    drivers/x/user.c, which never names LIMIT; lib/tmpl.c is compiled inside io_uring/host.c;
    sound/off.c is not compiled; drivers/m/mod.c is a module's unit."""
    files = write_tree(
        tmp_path,
        {
            "include/a.h": "#define LIMIT 32\n#define TWICE(x) ((x) * LIMIT)\n",
            "include/b.h": '#include "a.h"\nstatic inline int over(int n) { return n > TWICE(1); }\n',
            "include/c.h": "int over_count(void);\n",  # a different name: not a use
            "drivers/x/user.c": "#include <b.h>\nint f(int n) { return over(n); }\n",
            "drivers/m/mod.c": "int g(int n) { return TWICE(n); }\n",
            "lib/tmpl.c": "static int h(void) { return LIMIT; }\n",
            "io_uring/host.c": '#include "../lib/tmpl.c"\n',
            "sound/off.c": "int k(void) { return LIMIT; }\n",
            "kernel/other.c": "/* over(), LIMIT: comments */ int z;\n",
        },
    )
    by_source = {
        "drivers/x/user.c": [Unit("drivers/x/user.o", "drivers/x/user.c", "")],
        "drivers/m/mod.c": [Unit("drivers/m/mod.o", "drivers/m/mod.c", "drivers/m/m.ko")],
        "io_uring/host.c": [Unit("io_uring/host.o", "io_uring/host.c", "")],
        "kernel/other.c": [Unit("kernel/other.o", "kernel/other.c", "")],
    }
    found = discover(tmp_path, Define("include/a.h", 1, "LIMIT", 32), by_source, files)
    assert [u.object for u in found.units] == ["drivers/m/mod.o", "drivers/x/user.o", "io_uring/host.o"]
    assert found.names == {"LIMIT", "TWICE", "over"}
    assert found.uncompiled == ["sound/off.c"]
    assert found.refusals == []


def test_uses_no_name_can_carry_are_refused(tmp_path: Path) -> None:
    files = write_tree(
        tmp_path,
        {
            "include/a.h": "#define LIMIT 32\nstruct s { int v[LIMIT]; };\n",
            "block/b.c": "#include <a.h>\n#if LIMIT > 8\nint big;\n#endif\n",
        },
    )
    by_source = {"block/b.c": [Unit("block/b.o", "block/b.c", "")]}
    found = discover(tmp_path, Define("include/a.h", 1, "LIMIT", 32), by_source, files)
    reasons = dict(found.refusals)
    assert sorted(reasons) == ["block/b.c:2", "include/a.h:2"]
    assert "#if" in reasons["block/b.c:2"] and "declaration" in reasons["include/a.h:2"]


def test_module_and_assembly_units_are_refused_by_name(tmp_path: Path) -> None:
    """Neither is built: the refusals name the module and the assembly file."""
    env = KernelEnv("r", "p", "v", tmp_path, tmp_path, tmp_path)
    found = Discovery(
        units=[
            Unit("drivers/m/a.o", "drivers/m/a.c", "drivers/m/m.ko"),
            Unit("arch/x86/e.o", "arch/x86/e.S", ""),
        ],
        refusals=[("include/a.h:2", "LIMIT shapes a declaration")],
    )
    const = kernel._analyze_values(env, Define("include/a.h", 1, "LIMIT", 32), [32, 8, 48], found, b"", False)
    reasons = [f"{r.reason} {r.detail}" for r in const.refusals]
    assert reasons[0] == "LIMIT shapes a declaration include/a.h:2"
    assert "module drivers/m/m.ko uses it (drivers/m/a.c)" in reasons[1]
    assert "assembly unit arch/x86/e.S" in reasons[2] and not const.spans


def test_define_line_sets_the_value_not_a_digit_of_the_name() -> None:
    line = "#define I2C_ALF_IS_SUSPENDED\t\t0 /* bit 0 */\n"
    assert define_line(line, "I2C_ALF_IS_SUSPENDED", 3) == "#define I2C_ALF_IS_SUSPENDED\t\t3 /* bit 0 */\n"


def test_define_line_replaces_an_expression_body_with_the_value() -> None:
    line = "#define NR_MAX_BATCHED_MIGRATION\tHPAGE_PMD_NR\n"
    assert define_line(line, "NR_MAX_BATCHED_MIGRATION", 256) == "#define NR_MAX_BATCHED_MIGRATION\t(256)\n"
    line = "#define X (A + B) /* why */\n"
    assert define_line(line, "X", 7) == "#define X\t(7) /* why */\n"


def test_dry_run_units_and_modules() -> None:
    out = "\n".join(
        [
            "set -e;  echo '  CC      block/x.o'; gcc-12 -Wp,-MMD,block/.x.o.d -c -o block/x.o block/x.c",
            "set -e;  echo '  CC [M]  drivers/m/a.o'; gcc-12 -DMODULE -c -o drivers/m/a.o drivers/m/a.c",
            "set -e;  echo '  AS      arch/x86/e.o'; gcc-12 -c -o arch/x86/e.o arch/x86/e.S",
            "printf '%s\\n'   a.o | awk '!x[$0]++ { print(\"drivers/m/\"$0) }' > drivers/m/m.mod",
        ]
    )
    assert parse_dry_run(out) == [
        Unit("block/x.o", "block/x.c", ""),
        Unit("drivers/m/a.o", "drivers/m/a.c", "drivers/m/m.ko"),
        Unit("arch/x86/e.o", "arch/x86/e.S", ""),
    ]


@pytest.fixture(scope="module")
def env() -> KernelEnv:
    return KernelEnv.fetch()


@pytest.mark.parametrize(
    ("name", "units"),
    [
        ("BLK_MAX_REQUEST_COUNT", ["block/blk-core.o", "block/blk-mq.o"]),
        ("MAX_SOFTIRQ_RESTART", ["kernel/softirq.o"]),
        ("SHRINK_BATCH", ["mm/vmscan.o"]),
    ],
)
def test_case_study_constants_keep_their_units(env: KernelEnv, name: str, units: list[str]) -> None:
    found = discover_units(env, find_define(env, name))
    assert [u.object for u in found.units] == units
    assert found.refusals == [] and not any(u.module for u in found.units)


def test_a_header_inlines_constant_is_found_in_drivers(env: KernelEnv) -> None:
    """I2C_ALF_IS_SUSPENDED (include/linux/i2c.h) is used only by static inlines there and in
    drivers/i2c/i2c-core.h; no .c file names it, yet the i2c core and the designware driver
    (built in, and one part as a module) call those inlines."""
    define = find_define(env, "I2C_ALF_IS_SUSPENDED")
    assert define.file == "include/linux/i2c.h"
    found = discover_units(env, define)
    objects = {u.object: u.module for u in found.units}
    assert objects["drivers/i2c/i2c-core-base.o"] == ""
    assert objects["drivers/i2c/busses/i2c-designware-platdrv.o"] == ""
    assert objects["drivers/i2c/busses/i2c-designware-pcidrv.o"] == "drivers/i2c/busses/i2c-designware-pci.ko"
    assert {"i2c_mark_adapter_suspended", "__i2c_check_suspended"} <= found.names
    sources = [u.source for u in found.units]
    named = subprocess.run(
        ["grep", "-lw", define.name, *sources], cwd=env.source, capture_output=True, text=True
    )
    assert named.stdout == ""  # found through the headers only
    # drivers the config does not build (other architectures' i2c controllers) are not units
    assert "drivers/i2c/busses/i2c-exynos5.c" in found.uncompiled


def test_the_active_definition_is_the_one_the_config_compiles(env: KernelEnv) -> None:
    """mm/migrate.c defines NR_MAX_BATCHED_MIGRATION as HPAGE_PMD_NR under
    CONFIG_TRANSPARENT_HUGEPAGE (Debian's config has it) and as 512 in the `#else`: the active one
    is the first, and its value is what the macros give (1 << (21 - 12))."""
    define = find_define(env, "NR_MAX_BATCHED_MIGRATION")
    assert (define.file, define.value, define.expression) == ("mm/migrate.c", 512, "HPAGE_PMD_NR")
    text = (env.source / define.file).read_text().splitlines()[define.line - 1]
    assert "HPAGE_PMD_NR" in text


def test_a_literal_defined_once_is_read_without_preprocessing(env: KernelEnv) -> None:
    define = find_define(env, "HYSTART_DELAY_MAX")
    assert (define.file, define.value, define.expression) == ("net/ipv4/tcp_cubic.c", 16000, "")

"""The Python client's view of the knob table matches knob.h, compiled by the C compiler."""

import subprocess

from xtune import paths
from xtune.knobs import table as knobs

FIELDS = {
    "OFF_BACKEND": "backend",
    "OFF_TYPE": "type",
    "OFF_MIN": "min",
    "OFF_MAX": "max",
    "OFF_STEP": "step",
    "OFF_ORIGINAL": "original",
    "OFF_REG_GEN": "reg_gen",
    "OFF_DESIRED": "desired",
    "OFF_DESIRED_GEN": "desired_gen",
    "OFF_SEQ": "seq",
    "OFF_APPLIED": "applied",
    "OFF_APPLIED_GEN": "applied_gen",
    "OFF_STATE": "state",
    "OFF_ERROR": "error",
    "OFF_APPLIED_NS": "applied_ns",
}


def test_offsets_match_knob_h(tmp_path):
    lines = [
        f'printf("{const} %zu\\n", offsetof(struct xt_knob_slot, {field}));'
        for const, field in FIELDS.items()
    ]
    lines += [
        'printf("OFF_DOORBELL %zu\\n", offsetof(struct xt_knob_table_header, doorbell));',
        'printf("OFF_LEASE_DEADLINE %zu\\n", offsetof(struct xt_knob_table_header, lease_deadline_ns));',
        'printf("SLOT_SIZE %zu\\n", sizeof(struct xt_knob_slot));',
        'printf("HEADER_SIZE %d\\nSLOT_COUNT %d\\n", XT_KNOB_HEADER_SIZE, XT_KNOB_MAX);',
        'printf("NAME_LEN %d\\nTARGET_LEN %d\\n", XT_KNOB_NAME_LEN, XT_KNOB_TARGET_LEN);',
        'printf("TABLE_MAGIC %u\\n", XT_KNOB_TABLE_MAGIC);',
        'printf("KNOB_TABLE_SIZE %zu\\n", (size_t)XT_KNOB_TABLE_SIZE);',
    ]
    src = tmp_path / "layout.c"
    src.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include <xtune/knob.h>\nint main(void)\n{\n"
        + "\n".join(lines)
        + "\nreturn 0;\n}\n"
    )
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-I", str(paths.ROOT / "include"), "-o", str(exe), str(src)], check=True)
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        name, value = line.split()
        assert getattr(knobs, name) == int(value), name

#!/usr/bin/env python3
"""Writes the marker-encoded seeds of the fuzz targets (fuzz/seeds/TARGET/*.rep).

libFuzzer's inputs stay under -max_len (64 KiB), so the targets expand inputs
that start with the repeat marker (fuzz/fuzz_common.h, expand_repeats): after
the marker, 0xFF N0 N1 N2 L TOKEN writes TOKEN (L bytes) N times. These seeds
use it to start the fuzzers at nesting 100,000 deep (which once overflowed the
parsers' stacks), at the 256-level limit itself, and at long flat inputs, so
that mutations explore around them. Run it again after changing the encoding:

    /usr/bin/python3 fuzz/make_deep_seeds.py
"""

import pathlib
import struct

MARKER = b"\xfe"
REPEAT = b"\xff"
ROOT = pathlib.Path(__file__).resolve().parent / "seeds"


def rep(count, token):
    """The directive that writes `token` `count` times."""
    if isinstance(token, str):
        token = token.encode()
    assert 0 < len(token) < 256 and 0 <= count < 1 << 24
    return REPEAT + struct.pack("<I", count)[:3] + bytes([len(token)]) + token


def enc(*parts):
    """A marker-encoded input of literal text and rep() directives."""
    return MARKER + b"".join(p.encode() if isinstance(p, str) else p for p in parts)


def expand(data):
    """What the targets make of `data` (for the package seed's sizes)."""
    out, i = bytearray(), 1
    while i < len(data):
        if data[i] != 0xFF or len(data) - i < 5:
            out.append(data[i])
            i += 1
            continue
        count = data[i + 1] | data[i + 2] << 8 | data[i + 3] << 16
        token = data[i + 5:i + 5 + data[i + 4]]
        i += 5 + len(token)
        out += token * count
    return bytes(out)


def nested(count, opening, closing, inner="1"):
    return [rep(count, opening), inner, rep(count, closing)]


def json_seeds(key):
    """Seeds for a JSON document whose top-level version key is `key`."""
    head = '{"%s": 1, "description": ' % key
    return {
        "deep_arrays_100000": enc('{"%s": ' % key, *nested(100000, "[", "]"), "}"),
        "deep_objects_100000": enc('{"%s": ' % key, *nested(100000, '{"a":', "}"), "}"),
        "deep_mixed_300000": enc('{"%s": ' % key, *nested(300000, '[{"":', "}]"), "}"),
        "deep_unclosed_100000": enc('{"%s": ' % key, rep(100000, "[")),
        "deep_limit_256": enc(head, *nested(255, "[", "]"), "}"),
        "deep_limit_257": enc(head, *nested(256, "[", "]"), "}"),
        "brackets_in_string": enc(head, '"', rep(100000, "[{"), '"}'),
        "escapes_in_string": enc(head, '"', rep(50000, '\\"['), '"}'),
        "long_array": enc(head, "[", rep(20000, "1,"), "1]}"),
    }


def plan_seeds():
    seeds = json_seeds("svod_plan")
    program = ('{"svod_plan": 1, "buffers": {"o": {"dtype": "f32", "count": 4}}, "programs": {"k": '
               '{"language": "c", "source_file": "k.c", "entry": "k", "buffers": [{"name": "o", "access": "write"}], '
               '"global_size": ["')
    seeds["deep_launch_expression"] = enc(program, *nested(100000, "(", ")"), '"]}}, "ops": []}')
    seeds["many_ops"] = enc(program, '1"]}}, "ops": [', rep(2000, '{"run": "k", "buffers": ["o"]},'),
                            '{"run": "k", "buffers": ["o"]}]}')
    seeds["many_buffers"] = enc('{"svod_plan": 1, "buffers": {', rep(3000, '"b": {"dtype": "u8", "count": 1},'),
                                '"o": {"dtype": "f32", "count": 4}}, "ops": []}')
    return seeds


def package_seeds():
    seeds = json_seeds("format")
    # A whole package around a manifest nested 100,000 deep: the target makes
    # the digests match, so the manifest parser is reached through the reader.
    manifest = enc('{"format": 1, "programs": ', *nested(100000, "[", "]"), "}")
    size = len(expand(manifest))
    table = b"manifest".ljust(96, b"\0") + struct.pack("<QQ", 192, size) + bytes(16)
    header = b"SVODPKG\0" + struct.pack("<IIQ", 1, 1, 192 + size) + bytes(40)
    seeds["package_deep_manifest"] = MARKER + header + table + manifest[1:]
    return seeds


def expr_seeds():
    values = struct.pack("<4q", 7, 3, -2, 1 << 40)
    return {
        "deep_parentheses_100000": values + enc(*nested(100000, "(", ")", "N")),
        "deep_unary_100000": values + enc(rep(100000, "-"), "N"),
        "deep_min_100000": values + enc(rep(100000, "min(N,"), "1", rep(100000, ")")),
        "deep_limit_256": values + enc(*nested(255, "(", ")", "N")),
        "deep_limit_257": values + enc(*nested(256, "(", ")", "N")),
        "long_sum": values + enc("N", rep(50000, "+N")),
    }


def main():
    for target, seeds in (("plan_file", plan_seeds()), ("tune_file", json_seeds("svod_tune")),
                          ("package", package_seeds()), ("expr", expr_seeds())):
        folder = ROOT / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            assert len(data) < 4096, name
            (folder / (name + ".rep")).write_bytes(data)
        print(f"{target}: {len(seeds)} seeds in {folder}")


if __name__ == "__main__":
    main()

"""Loading libmoetune and the ctypes mirror of the C headers: loading errors,
the search order, struct layouts and enum values checked against the C
compiler's view of include/moetune/*.h."""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import moetune
from moetune import _lib
from conftest import PKG_PARENT, REPO, needs_lib

INCLUDE = os.environ.get("MOETUNE_INCLUDE",
                         os.path.join(REPO, "include"))
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")

# Python enum -> C prefix of its members, and the C name of its count.
ENUMS = [
    (_lib.Status, None, "MT_STATUS_COUNT_"),
    (_lib.DType, "MT_DTYPE_", "MT_DTYPE_COUNT_"),
    (_lib.QuantMode, "MT_QUANT_", "MT_QUANT_COUNT_"),
    (_lib.ActFormat, "MT_FORMAT_", "MT_FORMAT_COUNT_"),
    (_lib.Activation, "MT_ACT_", "MT_ACT_COUNT_"),
    (_lib.PFKind, "MT_PF_", "MT_PF_COUNT_"),
    (_lib.ExpertsKind, "MT_EXPERTS_", "MT_EXPERTS_COUNT_"),
    (_lib.LogLevel, "MT_LOG_", None),
    (_lib.LookupSource, "MT_LOOKUP_", None),
]
CONSTANTS = {"MT_QUANT_BLOCK": _lib.QUANT_BLOCK, "MT_MAX_EXPERTS": _lib.MAX_EXPERTS,
             "MT_MAX_DIM": _lib.MAX_DIM, "MT_MAX_TOKENS": _lib.MAX_TOKENS}


def c_name(enum_cls, prefix, member):
    if prefix is None:   # status
        return "MT_OK" if member.name == "OK" else "MT_ERR_" + member.name
    return prefix + member.name


def c_layout():
    """Compile and run a program printing `name value` lines for every struct
    size, field offset, enum value and constant the package mirrors."""
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "moetune/moetune.h"',
             'int main(void) {']
    for sname, st in _lib.STRUCTS.items():
        lines.append('printf("sizeof.%s %%zu\\n", sizeof(%s));' % (sname, sname))
        for f, _ in st._fields_:
            lines.append('printf("offsetof.%s.%s %%zu\\n", offsetof(%s, %s));'
                         % (sname, f, sname, f))
    for enum_cls, prefix, count in ENUMS:
        for m in enum_cls:
            n = c_name(enum_cls, prefix, m)
            lines.append('printf("%s %%d\\n", (int)%s);' % (n, n))
        if count:
            lines.append('printf("%s %%d\\n", (int)%s);' % (count, count))
    for n in CONSTANTS:
        lines.append('printf("%s %%lld\\n", (long long)%s);' % (n, n))
    lines += ["return 0;", "}"]
    d = tempfile.mkdtemp()
    src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run([CC, "-std=c11", "-I", INCLUDE, src, "-o", exe], check=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    shutil.rmtree(d)
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


needs_cc = pytest.mark.skipif(
    CC is None or not os.path.isfile(os.path.join(INCLUDE, "moetune", "moetune.h")),
    reason="no C compiler or no include/moetune (set CC / MOETUNE_INCLUDE)")


@pytest.fixture(scope="module")
def layout():
    return c_layout()


@needs_cc
@pytest.mark.parametrize("sname", sorted(_lib.STRUCTS))
def test_struct_layout_matches_c(layout, sname):
    st = _lib.STRUCTS[sname]
    assert ctypes.sizeof(st) == int(layout["sizeof." + sname]), sname
    for f, _ in st._fields_:
        assert getattr(st, f).offset == int(layout["offsetof.%s.%s" % (sname, f)]), (sname, f)


@needs_cc
@pytest.mark.parametrize("enum_cls,prefix,count", ENUMS, ids=[e[0].__name__ for e in ENUMS])
def test_enum_values_match_c(layout, enum_cls, prefix, count):
    for m in enum_cls:
        assert int(m) == int(layout[c_name(enum_cls, prefix, m)]), m
    if count:
        assert len(enum_cls) == int(layout[count])


@needs_cc
def test_constants_match_c(layout):
    for n, v in CONSTANTS.items():
        assert v == int(layout[n]), n


@needs_lib
def test_enum_names_match_library():
    L = moetune.load()
    from moetune.quant import _NAMES
    for q, name in _NAMES.items():
        assert _lib.cstr(L.mt_quant_mode_name(int(q))) == name
        assert moetune.QuantConfig.from_name(name).mode == q
    assert _lib.cstr(L.mt_dtype_name(int(moetune.DType.FP8_E4M3))) == "fp8e4m3"
    assert _lib.cstr(L.mt_activation_name(int(moetune.Activation.GELU))) == "gelu"
    assert _lib.cstr(L.mt_lookup_source_name(int(moetune.LookupSource.SAME_CC))) == "same-cc"
    assert L.mt_dtype_size(int(moetune.DType.BF16)) == 2


@needs_lib
def test_version_and_loaded_path():
    assert moetune.version().count(".") == 2
    assert len(moetune.template_hash()) == 64
    assert os.path.exists(moetune.loaded_path())


def _run_py(code, env_extra, cwd=None):
    env = dict(os.environ)
    env.update(env_extra)
    env["PYTHONPATH"] = PKG_PARENT
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=cwd)


def test_missing_library_is_a_clear_import_error(tmp_path):
    missing = str(tmp_path / "nowhere" / "libmoetune.so")
    r = _run_py("import moetune\n"
                "try:\n    moetune.version()\n"
                "except moetune.MoetuneLibraryNotFound as e:\n"
                "    assert isinstance(e, ImportError) and isinstance(e, moetune.MoetuneError)\n"
                "    print('RAISED', e)\n", {"MOETUNE_LIBRARY": missing})
    assert r.returncode == 0, r.stderr
    assert "RAISED" in r.stdout and missing in r.stdout and "does not exist" in r.stdout


def test_not_a_library_is_reported(tmp_path):
    bogus = tmp_path / "libmoetune.so"
    bogus.write_text("not an ELF file")
    r = _run_py("import moetune\n"
                "try:\n    moetune.load()\n"
                "except moetune.MoetuneLibraryNotFound as e:\n"
                "    print('RAISED', e.tried)\n", {"MOETUNE_LIBRARY": str(bogus)})
    assert r.returncode == 0, r.stderr
    assert "RAISED" in r.stdout and str(bogus) in r.stdout


def test_import_works_without_the_library(tmp_path):
    r = _run_py("import moetune; print(moetune.QuantConfig.fp8_block())",
                {"MOETUNE_LIBRARY": str(tmp_path / "missing.so")})
    assert r.returncode == 0 and r.stdout.strip() == "fp8-block", r.stderr


def test_search_order(monkeypatch):
    monkeypatch.setenv("MOETUNE_LIBRARY", "/x/libmoetune.so")
    assert _lib.candidate_paths() == [("$MOETUNE_LIBRARY", "/x/libmoetune.so")]
    monkeypatch.delenv("MOETUNE_LIBRARY")
    labels = [label for label, _ in _lib.candidate_paths()]
    assert labels[0] == "package" and labels[-1] == "find_library"
    for label, p in _lib.candidate_paths():
        if label == "repository build":
            assert not _lib._sanitized(p)


def test_sanitized_builds_are_skipped(tmp_path):
    d = tmp_path / "build-asan"
    d.mkdir()
    (d / "libmoetune.so").write_bytes(b"\x7fELF")
    assert _lib._sanitized(str(d / "libmoetune.so"))
    d2 = tmp_path / "build"
    d2.mkdir()
    (d2 / "libmoetune.so").write_bytes(b"\x7fELF....libasan.so.8\0")
    assert _lib._sanitized(str(d2 / "libmoetune.so"))
    (d2 / "libmoetune.so").write_bytes(b"\x7fELF....libc.so.6\0")
    assert not _lib._sanitized(str(d2 / "libmoetune.so"))

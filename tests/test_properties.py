"""Property tests of the validator and the dispatcher (issue: random shapes, dtypes, strides, devices and option
combinations; each call either dispatches to a shipped variant or raises ValueError/TypeError naming the
argument, never an exception from deep inside, never an unshipped variant).

Example counts (hypothesis `max_examples`; each property also asserts that at least this many examples ran):

  VALIDATOR_EXAMPLES = 1500  property A: check_arguments on mutated argument sets, then check_devices
  DISPATCH_EXAMPLES  =  600  property B: choose() from the tables and under a random SPARSE_MLA_AOT_FORCE, then
                             make_plan() for the call and for drawn token counts up to 16384 + 16384; each
                             example makes one table choice and one forced choice
  DECODE_EXAMPLES    =  400  property C: the public sparse_mla_decode on CPU tensors

In all, 2500 property-test examples per run (TOTAL_EXAMPLES), about 7 s on an idle core. The runs are
derandomized (hypothesis draws the same examples on every run and machine, so CI and a laptop agree) and the
example database is off (no failure is replayed from disk); a failure prints its falsifying example, which
@example or a plain test can then pin.

The oracle. Argument sets are built from valid pieces for a drawn shape (b, s_q, h_q, d_qk, topk, page sizes).
One focus argument (or none, in about 3 cases of 10) is replaced by a broken variant (wrong dtype, rank, shape,
stride, alignment, layout, value or type), every other piece with a small probability too, and valid pieces vary
among benign variants (an int8 / float8 view of the cache, a padded v32 page block, an explicit matching
kv_format, absent or present options, ...). The case records which arguments were broken and whether the break is
a type error (not a tensor / not a number) or a value error. Property A then requires exactly: no broken
argument -> a DecodeCall with the drawn shapes; some broken argument -> ValueError/TypeError whose message starts
with the name of a broken argument, of the type that argument's break calls for. So the validator may never
blame an argument that was valid, never accept a broken one, and never leak another exception type.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparse_mla_aot
from sparse_mla_aot import paths
from sparse_mla_aot.catalog import Catalog
from sparse_mla_aot.contract import FAMILIES, MAX_SPLITS, Variant, table_stem
from sparse_mla_aot.dispatch import DEFAULT_FORCED_FAMILY, FORCE_FIELDS, choose
from sparse_mla_aot.kv_cache import model1_page_bytes
from sparse_mla_aot.plan import make_plan
from sparse_mla_aot.validation import MAX_TOPK, DecodeCall, check_arguments, check_devices
from tests.test_dispatch import PRUNED_REASON, VARIANTS, write_kernel_dir

VALIDATOR_EXAMPLES = 1500
DISPATCH_EXAMPLES = 600
DECODE_EXAMPLES = 400
TOTAL_EXAMPLES = VALIDATOR_EXAMPLES + DISPATCH_EXAMPLES + DECODE_EXAMPLES

FORCE = paths.FORCE_ENV
CHECK = paths.CHECK_ENV
TARGET = "sm90"
TABLE_FORMATS = ("v32", "model1")
TABLE_H_Q = (8, 16, 32, 64, 128)

ARGUMENTS = ("q", "k_cache", "indices", "softmax_scale", "kv_format", "attn_sink", "topk_length", "extra_k_cache",
             "extra_indices", "extra_topk_length", "out", "lse")
# Longest first, so "extra_k_cache" is not read as "k_cache"... (the regex needs the name at the very start).
NAMED = re.compile(r"^(" + "|".join(sorted(ARGUMENTS, key=len, reverse=True)) + r")\b")

PER_TOKEN = {"v32": 656, "model1": 584}
D_QK = {"v32": 576, "model1": 512}
FORMAT_OF_D_QK = {576: "v32", 512: "model1"}
BAD_PERCENT = 3  # chance that a piece besides the focus is replaced by a broken variant

TYPE, VALUE = "TypeError", "ValueError"


def _settings(n: int):
    return settings(max_examples=n, deadline=None, database=None, derandomize=True, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@contextlib.contextmanager
def _env(**values):
    """Set (str) or unset (None) environment variables for the block, restoring them afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---------------------------------------------------------------------------------------------- tensors


def _dense(shape, dtype):
    return torch.zeros(shape, dtype=dtype)


def _sliced(shape, dtype):
    """A non-contiguous view: every other element of a last dimension twice as long."""
    return torch.zeros((*shape[:-1], 2 * shape[-1]), dtype=dtype)[..., ::2]


def _misaligned(shape, dtype):
    """A contiguous view starting one element after a (64-byte aligned) allocation."""
    return torch.zeros(math.prod(shape) + 1, dtype=dtype)[1:].view(shape)


def _acceptable(t, dtype, shape) -> bool:
    """docs/design.md#the-operation for a plain tensor argument: this dtype and shape, contiguous, 16-byte aligned."""
    return (isinstance(t, torch.Tensor) and t.dtype == dtype and tuple(t.shape) == tuple(shape)
            and t.is_contiguous() and t.data_ptr() % 16 == 0)


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return (f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)} strides {list(value.stride())} "
                f"ptr%16={value.data_ptr() % 16}")
    return repr(value)


@dataclass
class Case:
    args: dict
    b: int
    s_q: int
    h_q: int
    d_qk: int
    fmt: str            # the layout the valid caches use (d_qk's format; v32 when d_qk is unsupported)
    topk: int
    page_size: int
    extra_topk: int     # 0: no extra set (or a broken, partial one)
    extra_page_size: int
    bad: dict = field(default_factory=dict)  # argument -> TYPE | VALUE
    labels: dict = field(default_factory=dict)  # argument -> the variant drawn (for the failure report)

    def __repr__(self) -> str:
        lines = [f"Case(b={self.b}, s_q={self.s_q}, h_q={self.h_q}, d_qk={self.d_qk}, fmt={self.fmt}, "
                 f"topk={self.topk}, page_size={self.page_size}, extra_topk={self.extra_topk}, "
                 f"extra_page_size={self.extra_page_size}, bad={self.bad})"]
        for name, value in self.args.items():
            lines.append(f"  {name} [{self.labels.get(name, '-')}]: {_describe(value)}")
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis' falsifying-example printer
        printer.text(repr(self))


NEVER, MAYBE, ALWAYS = "never", "maybe", "always"


def _pick(draw, mode: str, good: list, bad: list):
    """One of `good`; one of `bad` when mode is ALWAYS, or rarely when MAYBE. Shrinks towards good[0]."""
    if mode == ALWAYS or (mode == MAYBE and draw(st.integers(0, 99)) >= 100 - BAD_PERCENT):
        return draw(st.sampled_from(bad)), True
    return draw(st.sampled_from(good)), False


def _garbage(draw):
    return draw(st.sampled_from([None, [1, 2], "tensor", 3.0]))


def _plain_tensor(draw, case: Case, name: str, dtype, shape, wrong_dtypes, wrong_shapes, *, optional: bool,
                  mode: str):
    """A plain tensor argument (q, indices, lengths, sink, out, lse): valid, or broken in one way."""
    good = ["absent", "dense"] if optional else ["dense"]
    bad = ["dtype", "shape", "sliced", "misaligned", "garbage"]
    label, _ = _pick(draw, mode, good, bad)
    if label == "absent":
        value = None
    elif label == "dense":
        value = _dense(shape, dtype)
    elif label == "dtype":
        value = _dense(shape, draw(st.sampled_from(wrong_dtypes)))
    elif label == "shape":
        value = _dense(draw(st.sampled_from(wrong_shapes)), dtype)
    elif label == "sliced":
        value = _sliced(shape, dtype)
    elif label == "misaligned":
        value = _misaligned(shape, dtype)
    else:
        value = _garbage(draw)
        if optional and value is None:
            value = [0]
    case.args[name], case.labels[name] = value, label
    if (value is not None or not optional) and not _acceptable(value, dtype, shape):
        # A slice of a size-1 dimension is still contiguous: the oracle looks at the tensor, not the label.
        case.bad[name] = VALUE if isinstance(value, torch.Tensor) else TYPE
    return value


CACHE_GOOD = {"v32": ["packed", "int8", "float8", "padded16"],
              "model1": ["packed", "int8", "float8", "records576", "records672"]}
CACHE_BAD_BOTH = ["padded8", "short_stride", "other_layout", "rank3", "heads2", "no_blocks", "no_tokens", "dtype",
                  "last_stride", "misaligned", "garbage"]
CACHE_BAD = {"v32": [*CACHE_BAD_BOTH, "records672"], "model1": [*CACHE_BAD_BOTH, "padded16", "dense_model1"]}


def _cache(draw, case: Case, name: str, fmt: str, mode: str) -> int:
    """A packed cache in `fmt`'s layout (docs/design.md#kv-cache-layouts), valid or broken; returns its page size."""
    per = PER_TOKEN[fmt]
    num_blocks = draw(st.integers(1, 3))
    page_size = draw(st.sampled_from([1, 2, 3, 16, 64]))
    page = page_size * per if fmt == "v32" else model1_page_bytes(page_size)
    label, _ = _pick(draw, mode, CACHE_GOOD[fmt], CACHE_BAD[fmt])

    def strided(block_stride, token_stride, last=1, offset=0):
        size = offset + (num_blocks - 1) * block_stride + (page_size - 1) * token_stride + (per - 1) * last + 1
        return torch.as_strided(torch.zeros(size, dtype=torch.uint8), (num_blocks, page_size, 1, per),
                                (block_stride, token_stride, token_stride, last), offset)

    ok = False
    if label in ("packed", "int8", "float8"):
        value, ok = strided(page, per), True
        if label != "packed":
            value = value.view(torch.int8 if label == "int8" else torch.float8_e4m3fn)
    elif label in ("padded16", "padded8"):
        pad = 16 if label == "padded16" else 8
        value = strided(page + pad, per)
        ok = fmt == "v32" and pad % 16 == 0  # v32 page blocks may be padded (aligned); model1's stride is fixed
    elif label == "short_stride":
        value = strided(page - 16, per)  # overlapping page blocks (model1: not its page size either)
    elif label == "dense_model1":
        value = strided(page_size * per, per)  # contiguous 584-byte rows: not model1's 576-padded page block
        ok = page_size * per == model1_page_bytes(page_size)
    elif label in ("records576", "records672"):
        stride = 576 if label == "records576" else 672
        value = strided(max(page, page_size * stride) if fmt == "v32" else page, stride)
        ok = fmt == "model1"  # model1's 584-byte rows are not records: only the block stride counts
    elif label == "other_layout":
        value = _dense((num_blocks, page_size, 1, PER_TOKEN["model1" if fmt == "v32" else "v32"]), torch.uint8)
    elif label == "rank3":
        value = _dense((num_blocks, page_size, per), torch.uint8)
    elif label == "heads2":
        value = _dense((num_blocks, page_size, 2, per), torch.uint8)
    elif label == "no_blocks":
        value = _dense((0, page_size, 1, per), torch.uint8)
    elif label == "no_tokens":
        value = _dense((num_blocks, 0, 1, per), torch.uint8)
    elif label == "dtype":
        value = _dense((num_blocks, page_size, 1, per),
                       draw(st.sampled_from([torch.bfloat16, torch.float32, torch.int32, torch.int16])))
    elif label == "last_stride":
        value = strided(2 * page, 2 * per, last=2)
    elif label == "misaligned":
        value = strided(page, per, offset=1)
    else:
        value = _garbage(draw)
    case.args[name], case.labels[name] = value, label
    if not ok:
        case.bad[name] = VALUE if isinstance(value, torch.Tensor) else TYPE
    return page_size


TOPKS_GOOD = [64, 128]
TOPKS_BAD = [0, 32, 100, 16448]


def _indices(draw, case: Case, name: str, mode: str) -> int:
    """indices / extra_indices; broken either in its topk (a count the kernels do not take) or as a tensor."""
    if mode == ALWAYS:
        mode = draw(st.sampled_from(["topk", ALWAYS]))
    topk, _ = _pick(draw, ALWAYS if mode == "topk" else mode, TOPKS_GOOD, TOPKS_BAD)
    b, s_q = case.b, case.s_q
    _plain_tensor(draw, case, name, torch.int32, (b, s_q, topk), [torch.int64, torch.int16, torch.float32],
                  [(b, topk), (b, s_q + 1, topk), (b + 1, s_q, topk), (b, s_q, 1, topk)], optional=False,
                  mode=MAYBE if mode == "topk" else mode)
    if topk not in TOPKS_GOOD and name not in case.bad:
        case.bad[name] = VALUE
    case.labels[name] = f"{case.labels[name]}, topk {topk}"
    return topk


# What a case may break on purpose (one of them, or nothing), besides rare breaks anywhere else.
FOCUS = ("shape", "q", "softmax_scale", "kv_format", "k_cache", "indices", "topk_length", "extra",
         "extra_k_cache", "extra_indices", "extra_topk_length", "attn_sink", "out", "lse")


@st.composite
def cases(draw, allow_bad: bool = True) -> Case:
    """An argument set for check_arguments: valid pieces for drawn shapes; when allow_bad, one focus argument is
    broken (or none, in 6 cases of 20) and every other piece is broken with probability BAD_PERCENT."""
    focus = draw(st.sampled_from([*[None] * 6, *FOCUS])) if allow_bad else None

    def mode(name: str) -> str:
        return NEVER if not allow_bad else ALWAYS if focus == name else MAYBE

    shape_part = draw(st.sampled_from(["b", "s_q", "h_q", "d_qk"])) if focus == "shape" else None
    b, bad_b = _pick(draw, ALWAYS if shape_part == "b" else mode("b"), [1, 2, 3, 4], [0])
    s_q, bad_s = _pick(draw, ALWAYS if shape_part == "s_q" else mode("s_q"), [1, 2, 3, 4], [0])
    h_q, bad_h = _pick(draw, ALWAYS if shape_part == "h_q" else mode("h_q"), [8, 16, 32, 64, 128], [4, 24])
    d_qk, bad_d = _pick(draw, ALWAYS if shape_part == "d_qk" else mode("d_qk"), [576, 512], [500])
    fmt = FORMAT_OF_D_QK.get(d_qk, "v32")
    case = Case({}, b, s_q, h_q, d_qk, fmt, 0, 0, 0, 1)

    q_mode = mode("q")
    if q_mode == ALWAYS and draw(st.integers(0, 4)) == 0:
        case.args["q"] = torch.zeros((b, s_q, d_qk, h_q), dtype=torch.bfloat16).transpose(2, 3)
        case.labels["q"] = "transposed"
        if not _acceptable(case.args["q"], torch.bfloat16, (b, s_q, h_q, d_qk)):
            case.bad["q"] = VALUE
    else:
        _plain_tensor(draw, case, "q", torch.bfloat16, (b, s_q, h_q, d_qk), [torch.float16, torch.float32,
                      torch.int8], [(b, h_q, d_qk), (b, s_q, h_q, 1, d_qk)], optional=False, mode=q_mode)
    if bad_b or bad_s or bad_h or bad_d:
        case.bad.setdefault("q", VALUE)

    scale, bad_scale = _pick(draw, mode("softmax_scale"), [0.1, 1, 0.0625],
                             [0, 0.0, -1, float("nan"), float("inf"), float("-inf"), "x", True, False, None])
    case.args["softmax_scale"] = scale
    if bad_scale:
        case.bad["softmax_scale"] = VALUE if isinstance(scale, (int, float)) and not isinstance(scale, bool) else TYPE

    kv_format, _ = _pick(draw, mode("kv_format"), [None, fmt],
                         ["fp8", "V32", "model1" if fmt == "v32" else "v32"])
    case.args["kv_format"], case.labels["kv_format"] = kv_format, repr(kv_format)
    if kv_format is not None and kv_format != FORMAT_OF_D_QK.get(d_qk):
        case.bad["kv_format"] = VALUE

    case.page_size = _cache(draw, case, "k_cache", fmt, mode("k_cache"))
    case.topk = _indices(draw, case, "indices", mode("indices"))
    _plain_tensor(draw, case, "topk_length", torch.int32, (b,), [torch.int64, torch.float32], [(b + 1,), (b, 1)],
                  optional=True, mode=mode("topk_length"))

    extra_good = ["none", "set", "set_with_lengths"]
    if focus in ("extra_k_cache", "extra_indices"):
        extra_good = ["set", "set_with_lengths"]
    elif focus == "extra_topk_length":
        extra_good = ["set_with_lengths"]
    extra, bad_extra = _pick(draw, mode("extra"), extra_good, ["only_cache", "only_indices", "only_lengths"])
    if extra in ("set", "set_with_lengths", "only_cache"):
        case.extra_page_size = _cache(draw, case, "extra_k_cache", fmt,
                                      NEVER if bad_extra else mode("extra_k_cache"))
    if extra in ("set", "set_with_lengths", "only_indices"):
        case.extra_topk = _indices(draw, case, "extra_indices", NEVER if bad_extra else mode("extra_indices"))
    if extra in ("set_with_lengths", "only_lengths"):
        _plain_tensor(draw, case, "extra_topk_length", torch.int32, (b,), [torch.int64], [(b + 1,)],
                      optional=extra != "only_lengths",
                      mode=NEVER if bad_extra else mode("extra_topk_length"))
    if extra in ("set", "set_with_lengths") and (case.args["extra_k_cache"] is None
                                                 or case.args["extra_indices"] is None):
        bad_extra = True  # a garbage None made the set partial: the pairing rule refuses it, a ValueError
        extra = "only_indices" if case.args["extra_k_cache"] is None else "only_cache"
    if bad_extra:
        # A partial extra set is refused by the pairing rule, which names the arguments given (a ValueError).
        names = {"only_cache": ("extra_k_cache", "extra_indices"), "only_indices": ("extra_k_cache", "extra_indices"),
                 "only_lengths": ("extra_topk_length",)}[extra]
        for name in names:
            case.bad[name] = VALUE
        case.extra_topk, case.extra_page_size = 0, 1

    _plain_tensor(draw, case, "attn_sink", torch.float32, (h_q,), [torch.bfloat16, torch.float64],
                  [(h_q + 1,), (1, h_q)], optional=True, mode=mode("attn_sink"))
    _plain_tensor(draw, case, "out", torch.bfloat16, (b, s_q, h_q, 512), [torch.float32, torch.float16],
                  [(b, s_q, h_q, 576), (b, h_q, s_q, 512) if s_q != h_q else (b, s_q, h_q, 511)], optional=True,
                  mode=mode("out"))
    _plain_tensor(draw, case, "lse", torch.float32, (b, s_q, h_q), [torch.bfloat16, torch.float64],
                  [(b, h_q, s_q) if s_q != h_q else (b, s_q, h_q, 1), (b * s_q, h_q)], optional=True,
                  mode=mode("lse"))
    if not allow_bad:
        assert not case.bad, case
    return case


def _check_outcome(case: Case):
    """Property A on one case; returns the DecodeCall or the exception raised."""
    try:
        call = check_arguments(**case.args)
    except (ValueError, TypeError) as error:
        message = str(error)
        named = NAMED.match(message)
        assert named, f"message does not start with an argument name: {message!r}\n{case!r}"
        assert case.bad, f"a valid argument set was refused: {type(error).__name__}: {message}\n{case!r}"
        name = named.group(1)
        assert name in case.bad, f"blamed {name}, which was valid (broken: {case.bad}): {message}\n{case!r}"
        assert type(error).__name__ == case.bad[name], (
            f"{type(error).__name__} for {name}, expected {case.bad[name]}: {message}\n{case!r}")
        return error
    assert not case.bad, f"accepted broken arguments {case.bad}\n{case!r}"
    assert isinstance(call, DecodeCall)
    assert (call.batch, call.s_q, call.h_q, call.topk) == (case.b, case.s_q, case.h_q, case.topk)
    assert call.batch_rows == case.b * case.s_q
    assert call.kv_format == case.fmt and call.softmax_scale == float(case.args["softmax_scale"])
    assert call.page_size == case.page_size and call.block_stride == case.args["k_cache"].stride(0)
    assert (call.extra_topk, call.extra_page_size) == (case.extra_topk, case.extra_page_size)
    for name in ("q", "k_cache", "indices", "attn_sink", "topk_length", "extra_k_cache", "extra_indices",
                 "extra_topk_length", "out", "lse"):
        assert getattr(call, name) is case.args.get(name), name
    return call


# ---------------------------------------------------------------------------------------------- property A


def test_validator_accepts_exactly_the_valid_argument_sets():
    seen = Counter()

    @_settings(VALIDATOR_EXAMPLES)
    @given(case=cases())
    def prop(case):
        seen["examples"] += 1
        result = _check_outcome(case)
        if isinstance(result, Exception):
            seen[type(result).__name__] += 1
            return
        seen["accepted"] += 1
        with pytest.raises(ValueError, match=r"(?i)^q must be a cuda tensor; got device cpu"):
            check_devices(result)

    prop()
    assert seen["examples"] >= VALIDATOR_EXAMPLES, seen
    # The strategy must keep producing both outcomes, or the property is hollow.
    assert seen["accepted"] >= VALIDATOR_EXAMPLES // 20, seen
    assert seen["ValueError"] + seen["TypeError"] >= VALIDATOR_EXAMPLES // 10, seen


# ---------------------------------------------------------------------------------------------- property B


SHIPPED_SPLITS = {fmt: sorted(Variant(*key).name for key, status in VARIANTS.items()
                              if status == "shipped" and key[0] == fmt) for fmt in TABLE_FORMATS}


def _table(kv_format: str, h_q: int) -> dict:
    """A table per (kv_format, h_q) over that format's shipped variants, bounds and split counts varying with
    h_q; split counts above any tile count (128, 64) exercise make_plan's clamp."""
    variants = SHIPPED_SPLITS[kv_format]
    bounds = {8: [1, 2, 4, 8], 16: [1, 8], 32: [3], 64: [], 128: [2, 5, 16]}[h_q]
    splits = [128, 64, 16, 4, 1]
    rows = [{"max_batch_rows": bound, "variant": variants[i % len(variants)], "num_splits": splits[i % len(splits)]}
            for i, bound in enumerate([*bounds, None])]
    return {"target": TARGET, "kv_format": kv_format, "h_q": h_q,
            "provenance": {"kind": "heuristic", "rule": "property-test tables"}, "rows": rows}


@pytest.fixture(scope="module")
def full_catalog(tmp_path_factory) -> Catalog:
    root = write_kernel_dir(tmp_path_factory.mktemp("properties") / "kernels")
    for kv_format in TABLE_FORMATS:
        for h_q in TABLE_H_Q:
            path = root / "tables" / TARGET / f"{table_stem(kv_format, h_q)}.json"
            path.write_text(json.dumps(_table(kv_format, h_q)))
    return Catalog(root)


def _render(fields: list[tuple[str, str]], draw) -> str:
    parts = [f"{' ' * draw(st.integers(0, 1))}{k}{' ' * draw(st.integers(0, 1))}={v}" for k, v in fields]
    return ",".join(parts) + ("," if draw(st.booleans()) else "")


@st.composite
def force_specs(draw):
    """(spec, expectation): expectation is ("table",), ("forced", fields), ("error", regex) or ("either",)."""
    kind = draw(st.sampled_from(["known", "grid", "missing", "non_int", "unknown_field", "bad_splits", "text",
                                 "empty"]))
    if kind == "empty":
        return "", ("table",)
    if kind == "text":
        spec = draw(st.text(alphabet="block_hstanumwrpigfe=,0123456789-+ ._x", max_size=80))
        return spec, (("table",) if spec == "" else ("either",))
    if kind == "known":  # a variant of the fake wheel's grid, shipped or pruned, of either kv_format and family
        _, family, *values = draw(st.sampled_from(sorted(VARIANTS)))
    else:
        family = draw(st.sampled_from(FAMILIES))
        values = [draw(st.sampled_from([8, 16, 32, 64])), draw(st.sampled_from([16, 32, 64])),
                  draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from([1, 2, 3]))]
    splits = draw(st.sampled_from([1, 2, 3, 8, 16, 64, 65, 1000, 10**12])) if kind != "bad_splits" else \
        draw(st.sampled_from([0, -1, -64]))
    fields = dict(zip(FORCE_FIELDS, [*values, splits]))
    items = [(k, str(v)) for k, v in fields.items()]
    if family != DEFAULT_FORCED_FAMILY or draw(st.booleans()):  # the default family may be left out
        items.append(("family", family))
    fields["family"] = family
    items = draw(st.permutations(items))
    if kind == "missing":
        drop = draw(st.sets(st.sampled_from(FORCE_FIELDS), min_size=1, max_size=len(FORCE_FIELDS) - 1))
        items = [(k, v) for k, v in items if k not in drop]
        missing = [f for f in FORCE_FIELDS if f in drop]
        return _render(items, draw), ("error", re.escape(f"lacks {missing}"))
    if kind == "non_int":
        i = draw(st.sampled_from([j for j, (k, _) in enumerate(items) if k != "family"]))
        bad_value = draw(st.sampled_from(["x", "1.5", "0x10", "", "16x", "1e3"]))
        items[i] = (items[i][0], bad_value)
        return _render(items, draw), ("error", re.escape(f"{items[i][0]} must be an integer; got {bad_value!r}"))
    if kind == "unknown_field":
        extra = draw(st.sampled_from(["mma=bf16", "num_split=4", "block_h", "=3"]))
        items.insert(draw(st.integers(0, len(items))), tuple(extra.split("=", 1)) if "=" in extra else (extra, None))
        spec = ",".join(k if v is None else f"{k}={v}" for k, v in items)
        return spec, ("error", re.escape(f"{extra!r} is not field=value"))
    if kind == "bad_splits":
        return _render(items, draw), ("error", re.escape(f"num_splits must be >= 1; got {splits}"))
    return _render(items, draw), ("forced", fields)


def _expected_row(table, batch_rows: int) -> int:
    for i, row in enumerate(table.rows):
        if row.max_batch_rows is None or batch_rows <= row.max_batch_rows:
            return i
    raise AssertionError("no open-ended row")


def _check_plan(catalog: Catalog, call: DecodeCall, choice, plan_tokens: tuple[int, int]) -> None:
    """make_plan on the chosen variant, for the call and for the same call with other token counts (the plan
    depends on shapes only, so the counts beyond this call's tiny tensors need no tensors)."""
    _check_plan_of(catalog, call, choice)
    topk, extra_topk = plan_tokens
    _check_plan_of(catalog, dataclasses.replace(call, topk=topk, extra_topk=extra_topk), choice)


def _check_plan_of(catalog: Catalog, call: DecodeCall, choice) -> None:
    v = catalog.shipped(TARGET)[choice.variant].variant
    assert v.kv_format == call.kv_format, (choice.variant, call.kv_format)
    plan = make_plan(call, choice.variant, v.block_h, v.block_t, choice.num_splits)
    tiles = (call.topk + call.extra_topk) // v.block_t
    assert 1 <= plan.num_splits <= MAX_SPLITS
    assert plan.num_splits == max(1, min(choice.num_splits, tiles, MAX_SPLITS))
    rows = call.batch_rows
    # one program per (row, split, head block), enough head blocks to cover h_q; a combine unless one split
    assert plan.split_grid == (rows * plan.num_splits * math.ceil(call.h_q / v.block_h), 1, 1)
    assert math.ceil(call.h_q / v.block_h) * v.block_h >= call.h_q
    assert plan.combine_grid == (None if plan.num_splits == 1 else (rows, call.h_q, 1))
    assert plan.partial_shape == (0 if plan.num_splits == 1 else rows, call.h_q, plan.num_splits)
    # on a GPU of `wave` programs at once, the rows that fill whole waves run unsplit; the rest as above
    head_blocks = math.ceil(call.h_q / v.block_h)
    for wave in (1, 7, 132):
        tail = make_plan(call, choice.variant, v.block_h, v.block_t, choice.num_splits, wave)
        whole = rows * head_blocks // wave * wave
        assert tail.unsplit_rows == (rows if plan.num_splits == 1 else whole // head_blocks)
        assert tail.num_splits == (1 if tail.unsplit_rows == rows else plan.num_splits)
        split_rows = rows - tail.unsplit_rows
        assert tail.split_grid == ((tail.unsplit_rows + split_rows * tail.num_splits) * head_blocks, 1, 1)
        assert tail.combine_grid == (None if tail.num_splits == 1 else (split_rows, call.h_q, 1))
        assert tail.partial_shape == (split_rows if tail.num_splits > 1 else 0, call.h_q, tail.num_splits)


def test_dispatch_always_picks_a_shipped_variant(full_catalog):
    catalog = full_catalog
    shipped = catalog.shipped(TARGET)
    records = catalog.records(TARGET)
    seen = Counter()

    @_settings(DISPATCH_EXAMPLES)
    @given(case=cases(allow_bad=False), force=force_specs(),
           plan_tokens=st.tuples(st.integers(1, MAX_TOPK // 64).map(lambda n: 64 * n),
                                 st.sampled_from([0, 64]) | st.integers(1, MAX_TOPK // 64).map(lambda n: 64 * n)))
    def prop(case, force, plan_tokens):
        seen["examples"] += 1
        call = _check_outcome(case)
        assert isinstance(call, DecodeCall), call

        with _env(**{FORCE: None}):
            choice = choose(catalog, TARGET, call.kv_format, call.h_q, call.batch_rows)
        table = catalog.table(TARGET, call.kv_format, call.h_q)
        assert choice.variant in shipped
        row = _expected_row(table, call.batch_rows)
        assert (choice.table, choice.row) == (table, row)
        assert (choice.variant, choice.num_splits) == (table.rows[row].variant, table.rows[row].num_splits)
        _check_plan(catalog, call, choice, plan_tokens)

        spec, expectation = force
        if expectation[0] == "forced":
            fields = expectation[1]
            name = Variant(call.kv_format, fields["family"], *(fields[f] for f in FORCE_FIELDS[:-1])).name
            if name in shipped:
                expectation = ("variant", name, fields["num_splits"])
            elif name in records:
                expectation = ("error", re.escape(f"variant {name} was pruned for {TARGET}: {PRUNED_REASON}"))
            else:
                expectation = ("error", re.escape(f"variant {name} is not in the wheel's grid for {TARGET}"))
        with _env(**{FORCE: spec}):
            try:
                forced = choose(catalog, TARGET, call.kv_format, call.h_q, call.batch_rows)
            except ValueError as error:
                seen["refused"] += 1
                assert FORCE in str(error), str(error)
                assert expectation[0] in ("error", "either"), (spec, expectation, str(error))
                if expectation[0] == "error":
                    assert re.search(expectation[1], str(error)), (spec, expectation, str(error))
                return
        seen["forced"] += 1
        assert forced.variant in shipped, (spec, forced)
        if expectation[0] == "table":
            assert forced == choice, (spec, forced)
        elif expectation[0] == "variant":
            assert (forced.variant, forced.num_splits, forced.table) == (expectation[1], expectation[2], None)
            assert forced.forced_by == spec
        else:
            assert expectation[0] == "either", (spec, expectation, forced)
        _check_plan(catalog, call, forced, plan_tokens)

    prop()
    assert seen["examples"] >= DISPATCH_EXAMPLES, seen
    assert seen["forced"] >= DISPATCH_EXAMPLES // 10 and seen["refused"] >= DISPATCH_EXAMPLES // 10, seen


# ---------------------------------------------------------------------------------------------- property C


def test_sparse_mla_decode_on_cpu_only_raises_argument_errors():
    """The public op validates before it touches a driver: on CPU tensors it raises exactly check_arguments'
    error, or (arguments valid) the device check's, whatever SPARSE_MLA_AOT_CHECK says."""
    seen = Counter()

    @_settings(DECODE_EXAMPLES)
    @given(case=cases(), check=st.sampled_from([None, "1"]))
    def prop(case, check):
        seen["examples"] += 1
        expected = _check_outcome(case)
        with _env(**{CHECK: check}):
            try:
                sparse_mla_aot.sparse_mla_decode(**case.args)
            except (ValueError, TypeError) as error:
                got = error
            else:
                raise AssertionError(f"sparse_mla_decode returned on CPU tensors\n{case!r}")
        if isinstance(expected, Exception):
            seen["argument"] += 1
            assert (type(got), str(got)) == (type(expected), str(expected))
        else:
            seen["device"] += 1
            assert type(got) is ValueError and re.match(r"(?i)q must be a cuda tensor; got device cpu", str(got)), got

    prop()
    assert seen["examples"] >= DECODE_EXAMPLES, seen
    assert seen["argument"] >= 1 and seen["device"] >= 1, seen


# ---------------------------------------------------------------------------------------------- found by the above


def _valid_args(kv_format="v32") -> dict:
    b, s_q, h_q, topk = 1, 1, 16, 64
    return {"q": torch.zeros((b, s_q, h_q, D_QK[kv_format]), dtype=torch.bfloat16),
            "k_cache": torch.zeros((1, 64, 1, 656), dtype=torch.uint8),
            "indices": torch.zeros((b, s_q, topk), dtype=torch.int32), "softmax_scale": 0.1}


def test_huge_int_softmax_scale_is_named():
    with pytest.raises((ValueError, TypeError)) as info:
        check_arguments(**{**_valid_args(), "softmax_scale": 10**400})
    assert str(info.value).startswith("softmax_scale"), str(info.value)


def test_unhashable_kv_format_is_named():
    with pytest.raises((ValueError, TypeError)) as info:
        check_arguments(**_valid_args(), kv_format=["v32"])
    assert str(info.value).startswith("kv_format"), str(info.value)

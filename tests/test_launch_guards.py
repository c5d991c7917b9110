"""The guards of launch.py on the CPU: argument-buffer layouts, the packing of one kernel's launch spec and its
capacity, the signature check that keeps a wheel's kernels and runtime from different builds apart, and what
DeviceKernels refuses to load (through tests.fake_runtime's FakeLauncher, so nothing reaches a driver)."""
from __future__ import annotations

import dataclasses
import json
import re
import struct

import pytest

from sparse_mla_aot import launch
from sparse_mla_aot.catalog import Catalog
from sparse_mla_aot.contract import COMBINE_NAME, COMBINE_PARAMS, SCRATCH_PARAMS, SPLIT_PARAMS, Param, Variant
from sparse_mla_aot.launch import (KERNEL_SPEC, MAX_ARG_BYTES, MAX_POINTERS, DeviceKernels, LoadedKernel, Pointer,
                                   argument_layout, kernel_spec)
from tests.fake_runtime import FakeLauncher, decode_spec, write_runtime_kernel_dir
from tests.fakes import fake_record
from tests.test_dispatch import VARIANTS

SHIPPED = sorted(Variant(*key).name for key, status in VARIANTS.items() if status == "shipped")
PRUNED = next(Variant(*key).name for key, status in VARIANTS.items() if status == "pruned")
SPLIT = "v32_fused_bh16_bt32_w4_s2"  # a shipped variant; fake_record gives it 4 warps and 19,206 B shared


class ImageRecordingLauncher(FakeLauncher):
    """FakeLauncher that also keeps each image handed to load_function (to see what reaches the driver)."""

    def __init__(self):
        super().__init__()
        self.images: dict[str, bytes] = {}

    def load_function(self, context, image, name, dynamic_shared_bytes):
        self.images[name] = image
        return super().load_function(context, image, name, dynamic_shared_bytes)


@pytest.fixture
def root(tmp_path):
    return write_runtime_kernel_dir(tmp_path / "kernels")


@pytest.fixture
def launcher():
    return ImageRecordingLauncher()


@pytest.fixture
def kernels(root, launcher) -> DeviceKernels:
    return DeviceKernels(Catalog(root), 0, "sm90", launcher)


def edit_record(root, name, **changes):
    """Rewrite one artifact record of the fake wheel (as a build from other sources would have written it)."""
    path = root / "sm90" / f"{name}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def params_json(params) -> list[dict]:
    return [p.to_json() for p in params]


def loaded_kernel(params, name="k", grid_dependency=False) -> LoadedKernel:
    return LoadedKernel(name, 16, 32, 0x2001, 128, 4096, grid_dependency, *argument_layout(tuple(params)))


# ---------------------------------------------------------------------------------------------- argument_layout


def test_argument_layout_aligns_each_parameter_naturally():
    """The buffer must mirror the kernel's parameter space: each value at a multiple of its own size."""
    params = (Param("a", "i32"), Param("p", "*fp32"), Param("b", "i32"), Param("c", "i64"), Param("d", "fp32"),
              Param("e", "fp32"), Param("s", "*i8"))
    layout, size = argument_layout(params)
    assert layout == (("i", 0), ("Q", 8), ("i", 16), ("q", 24), ("f", 32), ("f", 36), ("Q", 40))
    assert size == 48


def test_argument_layout_of_the_split_signature():
    """The real split kernel: 12 pointers, then scalars whose two i64 strides each skip 4 bytes of padding."""
    layout, size = argument_layout((*SPLIT_PARAMS, *SCRATCH_PARAMS))
    offsets = {p.name: offset for p, (_, offset) in zip((*SPLIT_PARAMS, *SCRATCH_PARAMS), layout)}
    assert [offsets[p.name] for p in SPLIT_PARAMS[:12]] == [8 * i for i in range(12)]
    assert (offsets["sm_scale_log2"], offsets["s_q"], offsets["page_size"]) == (96, 100, 136)
    assert (offsets["block_stride"], offsets["extra_page_size"], offsets["extra_block_stride"]) == (144, 152, 160)
    assert (offsets["global_scratch"], offsets["profile_scratch"], size) == (168, 176, 184)


def test_argument_layout_refuses_a_type_it_cannot_pack():
    """A parameter type outside i32/i64/fp32 and pointers has no struct format: refused, not packed wrongly."""
    with pytest.raises(KeyError, match="fp16"):
        argument_layout((Param("x", "fp16"),))


# ---------------------------------------------------------------------------------------------- kernel_spec


def test_kernel_spec_packs_scalars_and_pointer_slots():
    """Scalars sit in the buffer; pointers become (offset, source, addend) slots; scratch pointers stay NULL."""
    params = (Param("p", "*bf16"), Param("n", "i32"), Param("q", "*u8"), Param("stride", "i64"),
              Param("scale", "fp32"), *SCRATCH_PARAMS)
    kernel = loaded_kernel(params)
    spec = kernel_spec(kernel, (6, 2, 1), (Pointer(3), 7, Pointer(0, 64), -5, 0.5))
    assert len(spec) == KERNEL_SPEC.size
    fields = KERNEL_SPEC.unpack(spec)
    assert fields[:9] == (0x2001, 6, 2, 1, 128, 4096, 0, kernel.arg_bytes, 2)
    assert fields[9:15] == (0, 3, 0, 16, 0, 64)
    assert set(fields[15:9 + 3 * MAX_POINTERS]) == {0}
    args = fields[-1]
    assert struct.unpack_from("<i", args, 8) == (7,)
    assert struct.unpack_from("<q", args, 24) == (-5,)
    assert struct.unpack_from("<f", args, 32) == (0.5,)
    assert args[40:56] == bytes(16)  # the scratch pointers: NULL
    assert args[kernel.arg_bytes:] == bytes(MAX_ARG_BYTES - kernel.arg_bytes)


def test_kernel_spec_refuses_a_pointer_in_a_scalar_slot():
    """The launcher writes 8 bytes at a pointer slot: in a 4-byte scalar's place it would overwrite the next
    argument, so a Pointer must sit where the signature has a pointer."""
    params = (Param("p", "*bf16"), Param("n", "i32"), Param("m", "i32"), *SCRATCH_PARAMS)
    expected = r"^kernel k argument 1 is a scalar \('i'\); got Pointer\(source=2, addend=0\), a pointer$"
    with pytest.raises(ValueError, match=expected):
        kernel_spec(loaded_kernel(params), (1, 1, 1), (Pointer(0), Pointer(2), 3))


@pytest.mark.parametrize("count", [3, 5])
def test_kernel_spec_refuses_another_argument_count(count):
    """One argument too few or too many would shift every later one: refused, naming both counts."""
    params = (Param("p", "*bf16"), Param("n", "i32"), Param("m", "i32"), Param("k", "i32"), *SCRATCH_PARAMS)
    with pytest.raises(ValueError, match=rf"^kernel k takes 4 arguments before its scratch pointers; got {count}$"):
        kernel_spec(loaded_kernel(params), (1, 1, 1), (Pointer(0), *[1] * (count - 1)))


def test_kernel_spec_programmatic_only_where_compiled_for_it():
    """A programmatic dependent launch of a kernel that does not wait for the grid before it would race it."""
    params = (Param("n", "i32"), *SCRATCH_PARAMS)
    with pytest.raises(ValueError, match=r"^kernel k was not compiled with grid-dependency control: it cannot be a "
                                         r"programmatic dependent launch$"):
        kernel_spec(loaded_kernel(params), (1, 1, 1), (1,), programmatic=True)
    spec = kernel_spec(loaded_kernel(params, grid_dependency=True), (1, 1, 1), (1,), programmatic=True)
    assert KERNEL_SPEC.unpack(spec)[6] == 1
    assert KERNEL_SPEC.unpack(kernel_spec(loaded_kernel(params, grid_dependency=True), (1, 1, 1), (1,)))[6] == 0


def test_kernel_spec_holds_at_most_max_arg_bytes():
    """The launcher's buffer is MAX_ARG_BYTES: exactly that fits, 8 more are refused."""
    fits = [Param(f"x{i}", "i64") for i in range(MAX_ARG_BYTES // 8 - len(SCRATCH_PARAMS))]
    spec = kernel_spec(loaded_kernel((*fits, *SCRATCH_PARAMS)), (1, 1, 1), tuple(range(len(fits))))
    assert KERNEL_SPEC.unpack(spec)[7] == MAX_ARG_BYTES
    over = (*fits, Param("one_more", "i64"))
    with pytest.raises(ValueError, match=rf"^kernel k: {MAX_ARG_BYTES + 8} argument bytes and 0 pointers; the "
                                         rf"launcher holds at most {MAX_ARG_BYTES} and {MAX_POINTERS}$"):
        kernel_spec(loaded_kernel((*over, *SCRATCH_PARAMS)), (1, 1, 1), tuple(range(len(over))))


def test_kernel_spec_holds_at_most_max_pointers():
    """MAX_POINTERS pointer slots fit (scratch pointers take none); one more is refused."""
    fits = [Param(f"p{i}", "*u8") for i in range(MAX_POINTERS)]
    spec = kernel_spec(loaded_kernel((*fits, *SCRATCH_PARAMS)), (1, 1, 1), tuple(Pointer(i) for i in range(16)))
    assert KERNEL_SPEC.unpack(spec)[8] == MAX_POINTERS
    over = (*fits, Param("one_more", "*u8"))
    with pytest.raises(ValueError, match=rf"^kernel k: {8 * (MAX_POINTERS + 3)} argument bytes and "
                                         rf"{MAX_POINTERS + 1} pointers; the launcher holds at most"):
        kernel_spec(loaded_kernel((*over, *SCRATCH_PARAMS)), (1, 1, 1), tuple(Pointer(0) for _ in over))


# ---------------------------------------------------------------------------------------------- _check_signature


def test_check_signature_accepts_the_contract():
    launch._check_signature(fake_record(SPLIT))
    launch._check_signature(fake_record(COMBINE_NAME))


def _without(params, name):
    return tuple(p for p in params if p.name != name)


def _retyped(params, name, type_):
    return tuple(dataclasses.replace(p, type=type_) if p.name == name else p for p in params)


@pytest.mark.parametrize("name, params", [
    (SPLIT, _without((*SPLIT_PARAMS, *SCRATCH_PARAMS), "extra_topk_length_ptr")),  # an older kernel
    (SPLIT, (SPLIT_PARAMS[1], SPLIT_PARAMS[0], *SPLIT_PARAMS[2:], *SCRATCH_PARAMS)),  # reordered
    (SPLIT, _retyped((*SPLIT_PARAMS, *SCRATCH_PARAMS), "block_stride", "i32")),  # same names, other type
    (SPLIT, tuple(SPLIT_PARAMS)),  # no scratch pointers (another Triton)
    (SPLIT, (*COMBINE_PARAMS, *SCRATCH_PARAMS)),  # a split kernel with the combine kernel's parameters
    (COMBINE_NAME, (*SPLIT_PARAMS, *SCRATCH_PARAMS)),
])
def test_check_signature_refuses_another_parameter_list(name, params):
    """Arguments packed for another parameter list land in the wrong slots: refused before anything is loaded."""
    record = dataclasses.replace(fake_record(name), params=params)
    expected = (*(COMBINE_PARAMS if name == COMBINE_NAME else SPLIT_PARAMS), *SCRATCH_PARAMS)
    message = (f"sparse_mla_aot: kernel {name} was built with parameters {[p.name for p in params]}; this runtime "
               f"packs {[p.name for p in expected]}: the wheel's kernels and runtime come from different builds")
    with pytest.raises(RuntimeError, match=f"^{re.escape(message)}$"):
        launch._check_signature(record)


# ---------------------------------------------------------------------------------------------- DeviceKernels


def test_device_kernels_refuse_a_launcher_with_another_spec_size(root):
    """A native module from another build reads specs at other offsets: refused at construction."""

    class OtherBuild(FakeLauncher):
        SPEC_BYTES = launch.SPEC_BYTES + 8

    with pytest.raises(RuntimeError, match=rf"takes {launch.SPEC_BYTES + 8}-byte launch specs, launch\.py packs "
                                           rf"{launch.SPEC_BYTES}: they come from different builds"):
        DeviceKernels(Catalog(root), 0, "sm90", OtherBuild())


def test_device_kernels_take_the_device_s_primary_context(root, launcher):
    assert DeviceKernels(Catalog(root), 3, "sm90", launcher).context == launcher.primary_context(3)


def test_load_records_each_kernel_as_built_and_loads_it_once(kernels, launcher, root):
    """What a launch needs comes from the record: block = 32 x warps, the dynamic shared bytes asked for, the
    variant's block sizes, grid-dependency control and the layout of its recorded parameters."""
    kernels.load([SPLIT, COMBINE_NAME])
    split, combine = kernels.kernels[SPLIT], kernels.kernels[COMBINE_NAME]
    assert (split.name, split.block_h, split.block_t, split.block_x) == (SPLIT, 16, 32, 128)
    assert split.shared_bytes == 1000 * 16 + 100 * 32 + 4 + 2 and split.grid_dependency is True
    assert (split.layout, split.arg_bytes) == argument_layout((*SPLIT_PARAMS, *SCRATCH_PARAMS))
    assert (combine.block_h, combine.block_t, combine.shared_bytes) == (0, 0, 0)
    assert (combine.layout, combine.arg_bytes) == argument_layout((*COMBINE_PARAMS, *SCRATCH_PARAMS))
    assert launcher.loaded == [f"{SPLIT}_kernel", f"{COMBINE_NAME}_kernel"]
    assert launcher.images[f"{SPLIT}_kernel"] == (root / "sm90" / f"{SPLIT}.cubin").read_bytes()
    assert split.function != combine.function
    kernels.load([COMBINE_NAME, SPLIT])
    assert len(launcher.loaded) == 2  # already loaded: not loaded again


def test_load_ws_kernel_launches_its_producer_warps_too(kernels):
    """A ws record's num_warps counts the producer warpgroup (Variant.launch_warps): the block has them all."""
    name = "v32_ws_bh16_bt32_w8_s2"
    kernels.load([name])
    assert kernels.kernels[name].block_x == 32 * Variant.parse(name).launch_warps == 32 * 12


def test_load_nul_terminates_a_ptx_image(root, launcher):
    """The driver reads PTX as a C string: the image handed over ends in NUL (a cubin is handed over as is)."""
    edit_record(root, SPLIT, binary_format="ptx")
    DeviceKernels(Catalog(root), 0, "sm90", launcher).load([SPLIT, COMBINE_NAME])
    assert launcher.images[f"{SPLIT}_kernel"] == f"fake cubin of {SPLIT}".encode() + b"\0"
    assert launcher.images[f"{COMBINE_NAME}_kernel"] == f"fake cubin of {COMBINE_NAME}".encode()


def test_load_refuses_an_unknown_variant(kernels, launcher):
    with pytest.raises(KeyError, match=r"kernel v32_fused_bh16_bt64_w4_s2 cannot be loaded for sm90 \(no such kernel"):
        kernels.load(["v32_fused_bh16_bt64_w4_s2"])
    assert launcher.loaded == [] and kernels.kernels == {}


def test_load_refuses_a_pruned_variant(kernels, launcher):
    """A pruned variant has a record but no binary in the manifest: nothing reaches the driver."""
    assert PRUNED in kernels.catalog.records("sm90")
    with pytest.raises(KeyError, match=rf"kernel {PRUNED} cannot be loaded for sm90 \(pruned: "):
        kernels.load([PRUNED])
    assert launcher.loaded == [] and PRUNED not in kernels.kernels


def test_load_refuses_a_record_with_another_signature(root, launcher):
    """The signature check runs on the record, before the binary is read or loaded."""
    edit_record(root, SPLIT, params=params_json(_without((*SPLIT_PARAMS, *SCRATCH_PARAMS), "extra_indices_ptr")))
    kernels = DeviceKernels(Catalog(root), 0, "sm90", launcher)
    with pytest.raises(RuntimeError, match=rf"kernel {SPLIT} was built with parameters .*this runtime packs "
                                           rf".*'extra_indices_ptr'.*come from different builds"):
        kernels.load([SPLIT])
    assert launcher.loaded == [] and SPLIT not in kernels.kernels


def test_load_refuses_a_binary_whose_sha256_differs(root, kernels, launcher):
    """A damaged or swapped binary never reaches the driver; once the right bytes are back it loads."""
    path = root / "sm90" / f"{SPLIT}.cubin"
    good = path.read_bytes()
    path.write_bytes(b"another build's cubin")
    with pytest.raises(RuntimeError, match=rf"{re.escape(str(path))} has sha256 .*the manifest says .*the installed "
                                           rf"package is damaged"):
        kernels.load([SPLIT])
    assert launcher.loaded == [] and SPLIT not in kernels.kernels
    path.write_bytes(good)
    kernels.load([SPLIT])
    assert launcher.loaded == [f"{SPLIT}_kernel"]


def test_load_refuses_a_kernel_from_another_triton(root, launcher):
    """Another Triton may pass arguments differently, whatever the recorded names say."""
    edit_record(root, SPLIT, triton_version="3.6.0")
    kernels = DeviceKernels(Catalog(root), 0, "sm90", launcher)
    with pytest.raises(RuntimeError, match=rf"sm90/{SPLIT} was compiled by Triton 3\.6\.0, the package by Triton "
                                           rf"3\.9\.0"):
        kernels.load([SPLIT])
    assert launcher.loaded == []


def test_load_tables_loads_every_table_variant_and_the_combine_kernel(kernels, launcher):
    """prepare() loads what any table may choose, in a stable order, and nothing else."""
    named = {row.variant for table in kernels.catalog.tables("sm90") for row in table.rows}
    kernels.load_tables()
    assert set(kernels.kernels) == named | {COMBINE_NAME}
    assert launcher.loaded == [f"{name}_kernel" for name in sorted(named | {COMBINE_NAME})]
    assert set(SHIPPED) - named  # some shipped variant no table names: it stays unloaded


@pytest.mark.parametrize("variant", [PRUNED, "v32_fused_bh16_bt64_w4_s2"])
def test_load_tables_refuses_a_table_naming_a_variant_not_shipped(root, launcher, variant):
    """A table that names a pruned or unknown variant cannot be served: prepare() fails, not a later call, and
    before any kernel is loaded."""
    path = root / "tables" / "sm90" / "v32_h16.json"
    table = json.loads(path.read_text())
    table["rows"][0]["variant"] = variant
    path.write_text(json.dumps(table))
    with pytest.raises(ValueError, match=f"row 0 names {variant}, which is not a shipped split variant for sm90"):
        DeviceKernels(Catalog(root), 0, "sm90", launcher).load_tables()
    assert launcher.loaded == []


def test_load_tables_refuses_a_file_that_is_not_a_table_name(root, launcher):
    (root / "tables" / "sm90" / "notes.json").write_text("{}")
    with pytest.raises(ValueError, match=r"'notes' is not a table name <kv_format>_h<h_q>"):
        DeviceKernels(Catalog(root), 0, "sm90", launcher).load_tables()
    assert launcher.loaded == []


# ---------------------------------------------------------------------------------------------- launch_spec

POINTERS = tuple(0x7000_0000 + 0x1_0000 * i for i in range(8))
SCALARS = {"sm_scale_log2": 0.25, "s_q": 3, "h_q": 16, "topk": 128, "extra_topk": 64, "num_splits": 4,
           "unsplit_rows": 2, "has_topk_length": 1, "has_extra_topk_length": 0, "has_attn_sink": 1, "page_size": 64,
           "block_stride": 64 * 656, "extra_page_size": 1, "extra_block_stride": 2 ** 40}


def _values(params):
    """Pointer parameter i takes launch() pointer i mod 8 plus 16 * i bytes; scalars take SCALARS."""
    return tuple(Pointer(i % len(POINTERS), 16 * i) if p.type.startswith("*") else SCALARS[p.name]
                 for i, p in enumerate(params))


def _expected_args(params):
    return {p.name: POINTERS[i % len(POINTERS)] + 16 * i if p.type.startswith("*") else SCALARS[p.name]
            for i, p in enumerate(params)} | {p.name: 0 for p in SCRATCH_PARAMS}


def test_launch_spec_holds_context_split_and_combine(kernels):
    """Decoded as the launcher reads it: this device's context, each kernel's grid, block, shared bytes and
    arguments (scalars packed, pointers filled per call), the combine kernel programmatic as the row asks."""
    kernels.load([SPLIT, COMBINE_NAME])
    split = kernels.kernels[SPLIT]
    spec = kernels.launch_spec(split, (24, 1, 1), _values(SPLIT_PARAMS),
                               ((6, 16, 1), _values(COMBINE_PARAMS)), programmatic_combine=True)
    assert len(spec) == launch.SPEC_BYTES
    decoded = decode_spec(spec, POINTERS, kernels)
    assert decoded["context"] == kernels.context
    assert decoded["split"] == {"kernel": SPLIT, "grid": (24, 1, 1), "block_x": 128,
                                "shared_bytes": split.shared_bytes, "programmatic": False,
                                "args": _expected_args(SPLIT_PARAMS)}
    assert decoded["combine"] == {"kernel": COMBINE_NAME, "grid": (6, 16, 1), "block_x": 128, "shared_bytes": 0,
                                  "programmatic": True, "args": _expected_args(COMBINE_PARAMS)}
    ordinary = kernels.launch_spec(split, (24, 1, 1), _values(SPLIT_PARAMS), ((6, 16, 1), _values(COMBINE_PARAMS)))
    assert decode_spec(ordinary, POINTERS, kernels)["combine"]["programmatic"] is False


def test_launch_spec_of_a_one_split_plan_leaves_the_combine_slot_empty(kernels):
    kernels.load([SPLIT, COMBINE_NAME])
    spec = kernels.launch_spec(kernels.kernels[SPLIT], (6, 1, 1), _values(SPLIT_PARAMS), None,
                               programmatic_combine=True)
    assert spec[-KERNEL_SPEC.size:] == bytes(KERNEL_SPEC.size)
    assert decode_spec(spec, POINTERS, kernels)["combine"] is None


def test_launch_spec_ignores_programmatic_combine_where_the_combine_kernel_cannot_wait(root, launcher):
    """The sm89 proxy's combine kernel has no grid-dependency control: a row's programmatic flag is ignored there
    rather than refused (the same table rows serve both)."""
    edit_record(root, COMBINE_NAME, grid_dependency=False)
    kernels = DeviceKernels(Catalog(root), 0, "sm90", launcher)
    kernels.load([SPLIT, COMBINE_NAME])
    spec = kernels.launch_spec(kernels.kernels[SPLIT], (24, 1, 1), _values(SPLIT_PARAMS),
                               ((6, 16, 1), _values(COMBINE_PARAMS)), programmatic_combine=True)
    assert decode_spec(spec, POINTERS, kernels)["combine"]["programmatic"] is False


def test_launch_spec_needs_the_combine_kernel_loaded(kernels):
    """Even a one-split plan's spec is made only after load_tables (or load) brought in the combine kernel."""
    kernels.load([SPLIT])
    with pytest.raises(KeyError, match=COMBINE_NAME):
        kernels.launch_spec(kernels.kernels[SPLIT], (6, 1, 1), _values(SPLIT_PARAMS), None)


def test_launch_spec_refuses_arguments_that_do_not_match_either_kernel(kernels):
    kernels.load([SPLIT, COMBINE_NAME])
    split = kernels.kernels[SPLIT]
    with pytest.raises(ValueError, match=rf"^kernel {SPLIT} takes {len(SPLIT_PARAMS)} arguments before its scratch "
                                         rf"pointers; got {len(SPLIT_PARAMS) - 1}$"):
        kernels.launch_spec(split, (6, 1, 1), _values(SPLIT_PARAMS)[:-1], None)
    with pytest.raises(ValueError, match=rf"^kernel {COMBINE_NAME} takes {len(COMBINE_PARAMS)} arguments before its "
                                         rf"scratch pointers; got {len(SPLIT_PARAMS)}$"):
        kernels.launch_spec(split, (6, 1, 1), _values(SPLIT_PARAMS), ((6, 16, 1), _values(SPLIT_PARAMS)))

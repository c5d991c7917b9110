"""build_tools.operand_stores: which shared-memory stores of dot operands move, on TTGIR shaped like Triton 3.9's."""
from build_tools.operand_stores import PASS_ID, hoist_operand_stores

ASM = 'tt.elementwise_inline_asm "{ cvt.rn.f16x2.e4m3x2 h0, a0; }" {constraints = "=r,r", packed_element = 4 : i32, pure = false} %raw0 : tensor<64x64xi8, #blocked> -> tensor<64x64xbf16, #blocked> loc(#loc1)'

LOOP = f"""    %q0 = ttg.local_alloc %q : (tensor<16x64xbf16, #blocked2>) -> !ttg.memdesc<16x64xbf16, #shared, #smem> loc(#loc2)
    %r:2 = scf.for %tile = %c0 to %c8 step %c1 iter_args(%acc = %cst, %idx = %i0) -> (tensor<16x64xf32, #mma>, tensor<64xi32>)  : i32 {{
      %raw0 = tt.load %p0, %m : tensor<64x64x!tt.ptr<i8>, #blocked> loc(#loc3)
      %rope = tt.load %p1, %m : tensor<64x64x!tt.ptr<bf16>, #blocked> loc(#loc4)
      %k0 = {ASM}
      %k1 = {ASM}
      %s0 = ttg.local_alloc %rope : (tensor<64x64xbf16, #blocked>) -> !ttg.memdesc<64x64xbf16, #shared, #smem> loc(#loc5)
      %d0 = tt.dot %a, %b, %acc : tensor<16x64xbf16> * tensor<64x64xbf16> -> tensor<16x64xf32, #mma> loc(#loc6)
      %s1 = ttg.local_alloc %k0 : (tensor<64x64xbf16, #blocked>) -> !ttg.memdesc<64x64xbf16, #shared, #smem> loc(#loc7)
      %l1 = ttg.local_load %s1 : !ttg.memdesc<64x64xbf16, #shared, #smem> -> tensor<64x64xbf16, #dot1> loc(#loc8)
      %d1 = tt.dot %a, %l1, %d0 : tensor<16x64xbf16> * tensor<64x64xbf16> -> tensor<16x64xf32, #mma> loc(#loc9)
      %s2 = ttg.local_alloc %k1 : (tensor<64x64xbf16, #blocked>) -> !ttg.memdesc<64x64xbf16, #shared, #smem> loc(#loc10)
      %l2 = ttg.local_load %s2 : !ttg.memdesc<64x64xbf16, #shared, #smem> -> tensor<64x64xbf16, #dot1> loc(#loc11)
      %d2 = tt.dot %a, %l2, %d1 : tensor<16x64xbf16> * tensor<64x64xbf16> -> tensor<16x64xf32, #mma> loc(#loc12)
      scf.yield %d2, %idx : tensor<16x64xf32, #mma>, tensor<64xi32> loc(#loc13)
    }} loc(#loc14)"""


def _order(ttgir: str) -> list[str]:
    return [line.split(" = ", 1)[0].strip() for line in ttgir.splitlines() if " = " in line]


def test_each_dequantized_operand_is_stored_right_after_its_inline_asm():
    hoisted, moved = hoist_operand_stores(LOOP)
    assert moved == 2
    assert _order(hoisted) == ["%q0", "%r:2", "%raw0", "%rope", "%k0", "%s1", "%k1", "%s2", "%s0", "%d0", "%l1",
                               "%d1", "%l2", "%d2"]
    assert sorted(hoisted.splitlines()) == sorted(LOOP.splitlines())  # lines move, none changes
    assert hoist_operand_stores(hoisted) == (hoisted, 0)  # idempotent: already in place


def test_a_loaded_operand_a_value_from_outside_the_block_and_a_nested_definition_stay():
    # %s0 stores a tt.load result, %q0 a value defined outside the loop; below, %k2 is made inside a nested region
    nested = LOOP.replace("      %s2 = ttg.local_alloc %k1", "      %s2 = ttg.local_alloc %k2").replace(
        "      %k1 = " + ASM, "      %z = scf.if %c -> tensor<64x64xbf16> {\n        %k2 = " + ASM
        + "\n        scf.yield %k2 : tensor<64x64xbf16> loc(#loc15)\n      } loc(#loc16)")
    hoisted, moved = hoist_operand_stores(nested)
    assert moved == 1  # only %s1 (of %k0)
    order = _order(hoisted)
    assert order.index("%s1") == order.index("%k0") + 1
    assert order.index("%s0") > order.index("%rope") + 1 and order.index("%s2") > order.index("%d1")
    outside = "    %k9 = " + ASM + "\n" + LOOP.replace("ttg.local_alloc %k0 ", "ttg.local_alloc %k9 ")
    order = _order(hoist_operand_stores(outside)[0])
    assert order[order.index("%s1") - 1] == "%d0"  # where Triton put it


def test_a_result_of_a_multi_result_definition_moves():
    multi = LOOP.replace("      %k1 = ", "      %k1:2 = ").replace("ttg.local_alloc %k1 ", "ttg.local_alloc %k1#1 ")
    order = _order(hoist_operand_stores(multi)[0])
    assert order.index("%s2") == order.index("%k1:2") + 1


def test_the_pass_is_in_the_toolchain_and_the_compile_hooks_key():
    from build_tools import artifact
    from build_tools.compile import AssembleStage
    from build_tools.variant import get_target

    assert PASS_ID in artifact.toolchain(get_target("sm120"))["ir_passes"]
    assert PASS_ID in AssembleStage("sm_120f", ())()[0]

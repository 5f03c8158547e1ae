"""The MLIR ops the export needs whose xDSL 0.75 definition is missing or narrower than MLIR's.

xDSL's `arith` has no `arith.remf`; its integer casts (`extui`, `extsi`, `trunci`, `index_cast`), int <-> float
conversions and `arith.select` take scalars only, where MLIR's take vectors too (a select's condition may be a vector
of i1); its `arith.cmpi`/`arith.cmpf` give an i1 even for vector operands, where MLIR's give a vector of i1; its
`scf.execute_region` prints without the `scf.yield` that MLIR requires there (this one prints in the generic form,
terminator included). These definitions have MLIR's names, operands and pretty syntax (`arith.select` always
prints both types, `: i1, f32`, which MLIR's parser accepts), so the printed text is plain MLIR. `EXTRA_OPS` lists
them for a reader (the importer) to register over xDSL's own.
"""
from __future__ import annotations

from typing import ClassVar

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, VectorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AttrConstraint,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

__all__ = ["EXTRA_OPS", "ExecuteRegionOp", "CmpiOp", "CmpfOp", "RemFOp", "SelectOp", "ExtUIOp", "ExtSIOp", "TruncIOp",
           "IndexCastOp",
           "SIToFPOp", "UIToFPOp",
           "FPToSIOp", "FPToUIOp"]


def _shape(t: Attribute) -> tuple[int, ...]:
    return tuple(t.get_shape()) if isinstance(t, VectorType) else ()


def _element(t: Attribute) -> Attribute:
    return t.element_type if isinstance(t, VectorType) else t


@irdl_op_definition
class RemFOp(IRDLOperation):
    """`arith.remf`: the float remainder with the sign of the dividend (C's fmod)."""

    name = "arith.remf"
    T: ClassVar = VarConstraint("T", arith.floatingPointLike)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    fastmath = prop_def(arith.FastMathFlagsAttr, default_value=arith.FastMathFlagsAttr("none"))
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs (`fastmath` `` $fastmath^)? attr-dict `:` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[lhs, rhs], result_types=[lhs.type],
                         properties={"fastmath": arith.FastMathFlagsAttr("none")})


class ExecuteRegionOp(scf.ExecuteRegionOp):
    """`scf.execute_region`: runs its region (which may hold several blocks) once; printed in the generic form."""

    name = "scf.execute_region"
    print = Operation.print  # the generic form: the region's terminator is printed


CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
CMPF_PREDICATES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une",
                   "uno", "true")


def _bool_like(t: Attribute) -> Attribute:
    """i1, or a vector of i1 of t's shape."""
    return VectorType(IntegerType(1), t.get_shape()) if isinstance(t, VectorType) else IntegerType(1)


class _Compare(IRDLOperation):
    """A lane-wise comparison `arith.cmpX pred, %a, %b : T` whose result is i1 or a vector of i1 of T's shape."""

    PREDICATES: ClassVar[tuple[str, ...]] = ()

    def __init__(self, lhs: SSAValue, rhs: SSAValue, predicate: str | int):
        pred = self.PREDICATES.index(predicate) if isinstance(predicate, str) else predicate
        props: dict[str, Attribute] = {"predicate": IntegerAttr(pred, 64)}
        if "fastmath" in type(self).get_irdl_definition().properties:
            props["fastmath"] = arith.FastMathFlagsAttr("none")
        super().__init__(operands=[lhs, rhs], result_types=[_bool_like(lhs.type)], properties=props)

    def verify_(self) -> None:
        if self.lhs.type != self.rhs.type:
            raise VerifyException(f"operands must have one type, got {self.lhs.type} and {self.rhs.type}")
        if self.result.type != _bool_like(self.lhs.type):
            raise VerifyException(f"the result of comparing {self.lhs.type} must be {_bool_like(self.lhs.type)}")
        if not 0 <= self.predicate.value.data < len(self.PREDICATES):
            raise VerifyException(f"unknown predicate {self.predicate.value.data}")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.PREDICATES[self.predicate.value.data]}, ")
        printer.print_operand(self.lhs)
        printer.print_string(", ")
        printer.print_operand(self.rhs)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)

    @classmethod
    def parse(cls, parser: Parser) -> _Compare:
        pos = parser.pos
        pred = parser.parse_identifier()
        if pred not in cls.PREDICATES:
            parser.raise_error(f"unknown predicate {pred!r}", pos, parser.pos)
        parser.parse_punctuation(",")
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        lhs, rhs = parser.resolve_operands([a, b], [t, t], parser.pos)
        return cls(lhs, rhs, pred)


def _comparison(name: str, predicates: tuple[str, ...], operands: AttrConstraint, fastmath: bool,
                doc: str) -> type[_Compare]:
    """An `arith.cmpX` op: operands of one type that `operands` allows, a predicate among `predicates` (and a
    `fastmath` property, always none, where MLIR's op has one)."""
    fields: dict[str, object] = {
        "__doc__": doc, "__module__": __name__, "__annotations__": {"PREDICATES": "ClassVar[tuple[str, ...]]"},
        "name": name, "PREDICATES": predicates, "predicate": prop_def(IntegerAttr), "lhs": operand_def(operands),
        "rhs": operand_def(operands), "result": result_def(), "traits": traits_def(Pure())}
    if fastmath:
        fields["fastmath"] = prop_def(arith.FastMathFlagsAttr, default_value=arith.FastMathFlagsAttr("none"))
    return irdl_op_definition(type(name.split(".")[1].title() + "Op", (_Compare,), fields))


CmpiOp = _comparison("arith.cmpi", CMPI_PREDICATES, arith.signlessIntegerLike, False,
                     "`arith.cmpi`: compare integers (or index values), lane-wise on vectors.")
CmpfOp = _comparison("arith.cmpf", CMPF_PREDICATES, arith.floatingPointLike, True,
                     "`arith.cmpf`: compare floats (ordered or unordered predicates), lane-wise on vectors.")


@irdl_op_definition
class SelectOp(IRDLOperation):
    """`arith.select`: a lane-wise choice when the condition is a vector of i1, a whole-value one when it is i1."""

    name = "arith.select"
    T: ClassVar = VarConstraint("T", AnyAttr())
    cond = operand_def()
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($result)"

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[cond, lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        c = self.cond.type
        if _element(c) != IntegerType(1):
            raise VerifyException(f"the condition must be i1 or a vector of i1, got {c}")
        if isinstance(c, VectorType) and _shape(c) != _shape(self.result.type):
            raise VerifyException(f"a vector condition {c} must have the shape of the values {self.result.type}")


def _is_int(t: Attribute) -> bool:
    return isinstance(t, IntegerType | IndexType)


def _is_float(t: Attribute) -> bool:
    return isinstance(t, arith.AnyFloat)  # type: ignore[arg-type]


def _cast(name: str, src_ok, dst_ok, width_rule: str | None, doc: str) -> type[IRDLOperation]:
    """A one-operand conversion op over scalars or vectors of one shape."""

    def verify_(self) -> None:
        s, d = self.input.type, self.result.type
        if _shape(s) != _shape(d):
            raise VerifyException(f"operand {s} and result {d} must both be scalars or vectors of one shape")
        se, de = _element(s), _element(d)
        if not src_ok(se) or not dst_ok(de):
            raise VerifyException(f"cannot convert {s} to {d}")
        if width_rule is not None:
            sw, dw = se.width.data, de.width.data  # type: ignore[attr-defined]
            if (width_rule == "wider" and not dw > sw) or (width_rule == "narrower" and not dw < sw):
                raise VerifyException(f"the result of {name} must be {width_rule} than its operand: {s} to {d}")

    def __init__(self, value: SSAValue, target: Attribute):
        IRDLOperation.__init__(self, operands=[value], result_types=[target])

    cls = type(name.split(".")[1].title().replace("_", "") + "Op", (IRDLOperation,), {
        "__doc__": doc, "name": name, "input": operand_def(), "result": result_def(),
        "traits": traits_def(Pure()), "assembly_format": "$input attr-dict `:` type($input) `to` type($result)",
        "verify_": verify_, "__init__": __init__, "__module__": __name__,
    })
    return irdl_op_definition(cls)


def _int(t: Attribute) -> bool:
    return isinstance(t, IntegerType)


ExtUIOp = _cast("arith.extui", _int, _int, "wider", "zero-extend an integer (or each lane)")
ExtSIOp = _cast("arith.extsi", _int, _int, "wider", "sign-extend an integer (or each lane)")
TruncIOp = _cast("arith.trunci", _int, _int, "narrower", "keep the low bits of an integer (or each lane)")
IndexCastOp = _cast("arith.index_cast", _is_int, _is_int, None, "index <-> integer, sign-extending or truncating")
SIToFPOp = _cast("arith.sitofp", _int, _is_float, None, "a signed integer as the nearest float")
UIToFPOp = _cast("arith.uitofp", _int, _is_float, None, "an unsigned integer as the nearest float")
FPToSIOp = _cast("arith.fptosi", _is_float, _int, None, "a float truncated to a signed integer (poison outside)")
FPToUIOp = _cast("arith.fptoui", _is_float, _int, None, "a float truncated to an unsigned integer (poison outside)")

EXTRA_OPS: tuple[type[IRDLOperation], ...] = (ExecuteRegionOp, CmpiOp, CmpfOp, RemFOp, SelectOp, ExtUIOp, ExtSIOp,
                                              TruncIOp, IndexCastOp, SIToFPOp, UIToFPOp, FPToSIOp, FPToUIOp)

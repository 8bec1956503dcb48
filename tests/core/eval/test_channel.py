"""The judge's unpickler of what a candidate sends (kag.core.eval.boundary.restricted_loads), attacked
directly with hand-written pickles: no opcode sequence may import or call anything off its allow-list,
and what is allowed comes back as plain data or an exact torch.Tensor."""

from __future__ import annotations

import io
import pickle
import pickletools

import pytest
import torch

from kag.core.eval.boundary import RefusedObject, restricted_loads
from kag.core.eval.candidate.channel import dumps

SIDE_EFFECT = []


def _global(module: str, name: str, proto: int) -> bytes:
    """A pickle that only looks up ``module.name`` (and calls it with one string argument)."""
    if proto < 4:  # GLOBAL opcode: "c module\nname\n"
        return b"c" + module.encode() + b"\n" + name.encode() + b"\n" + b"(S'kag-test'\ntR."
    body = (pickle.SHORT_BINUNICODE + bytes([len(module)]) + module.encode()
            + pickle.SHORT_BINUNICODE + bytes([len(name)]) + name.encode() + pickle.STACK_GLOBAL
            + pickle.SHORT_BINUNICODE + bytes([8]) + b"kag-test" + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP)
    return pickle.PROTO + bytes([proto]) + body


@pytest.mark.parametrize("proto", [0, 2, 4, 5])
@pytest.mark.parametrize("module,name", [("os", "system"), ("builtins", "eval"), ("builtins", "getattr"),
                                         ("builtins", "__import__"), ("subprocess", "getoutput"),
                                         ("copyreg", "_reconstructor"), ("torch", "load"),
                                         ("torch.serialization", "load"), ("importlib", "import_module"),
                                         ("tests.core.eval.test_channel", "SIDE_EFFECT")])
def test_a_lookup_off_the_allow_list_is_refused_before_anything_runs(module, name, proto):
    data = _global(module, name, proto)
    pickletools.dis(data, out=io.StringIO())  # a well-formed pickle: refused for what it names
    with pytest.raises(RefusedObject, match=f"{module}.{name}"):
        restricted_loads(data)
    assert SIDE_EFFECT == []


def test_the_old_inst_and_obj_opcodes_are_refused_too():
    inst = b"(S'echo kag'\nios\nsystem\n."  # INST: import os.system and call it
    with pytest.raises(RefusedObject, match="os.system"):
        restricted_loads(inst)
    obj = b"(cos\nsystem\nS'echo kag'\no."  # OBJ: the class from the stack
    with pytest.raises(RefusedObject, match="os.system"):
        restricted_loads(obj)


def test_a_tensor_dtype_is_allowed_but_no_other_torch_attribute():
    assert restricted_loads(dumps(torch.float16)) is torch.float16
    for name in ("ops", "compile", "cuda", "_C"):  # attributes of torch that are not dtypes
        with pytest.raises(RefusedObject, match=f"torch.{name}"):
            restricted_loads(b"ctorch\n" + name.encode() + b"\n.")


def test_plain_data_and_exact_tensors_come_back():
    msg = ("outputs", 3, [torch.arange(4.0), {"k": (1, 2.5, None, True)}], {1, 2}, frozenset({3}), slice(1, 5), 2j)
    back = restricted_loads(dumps(msg))
    assert back[:2] == ("outputs", 3) and torch.equal(back[2][0], torch.arange(4.0))
    assert type(back[2][0]) is torch.Tensor and back[2][1] == {"k": (1, 2.5, None, True)}
    assert back[3:] == ({1, 2}, frozenset({3}), slice(1, 5), 2j)


def test_a_message_of_only_garbage_is_an_error_not_a_crash():
    with pytest.raises((pickle.UnpicklingError, EOFError, ValueError, IndexError)):
        restricted_loads(b"\x80\x05\x95garbage")

"""Each kernel's argument types, read once from its source: both device layers type a launch's arguments by
this table, so a caller passes plain Python ints and buffers and never casts (`np.int32(n)`), and a
launch with the wrong number of arguments fails at once, naming the kernel, instead of reading garbage.

A kernel's parameters are parsed from `extern "C" __global__ void NAME(params)`, a parameter-list macro
(a lone upper-case identifier such as INDEX_PARAMS) replaced by its #define first. Kinds, as Python's
struct module and PyCUDA's `prepare` spell them: P a pointer (any `*` parameter), i int, I a 32-bit
unsigned, q long long, Q a 64-bit unsigned. A parameter of any other type stops the load (`KernelError`):
add it to SCALARS.
"""
import functools
import re

KERNEL = re.compile(r'extern "C" __global__ void (\w+)\s*\(([^)]*)\)')
SCALARS = {"int": "i", "unsigned": "I", "unsigned int": "I", "uint32_t": "I", "u32": "I",
           "long long": "q", "int64_t": "q", "unsigned long long": "Q", "uint64_t": "Q", "u64": "Q"}
_MASKS = {"I": (1 << 32) - 1, "Q": (1 << 64) - 1}


class KernelError(TypeError):
    """A kernel parameter no layer knows how to pass, or a launch with the wrong arguments."""


def expanded(params, source_text):
    """`params` with a parameter-list macro (a lone identifier, e.g. INDEX_PARAMS) replaced by its #define."""
    def expand(match):
        found = re.search(rf"#define {match.group(1)}\s+((?:.*\\\n)*.*)", source_text)
        return found.group(1).replace("\\\n", " ") if found else match.group(0)
    return re.sub(r"(?:(?<=,)|^)\s*([A-Z_][A-Z0-9_]*)\s*(?=,|$)", expand, params)


def parameters(params, source_text):
    """[(type, name)] of a kernel's parameter text."""
    found = []
    for text in expanded(params, source_text).split(","):
        words = text.replace("*", " * ").split()
        if words:
            found.append((" ".join(w for w in words[:-1] if w not in ("const", "__restrict__")), words[-1]))
    return found


def kind(type_text, kernel):
    if "*" in type_text:
        return "P"
    if type_text not in SCALARS:
        raise KernelError(f"kernel {kernel}: no launch rule for a parameter of type '{type_text}' "
                          f"(mapper/device/signatures.py SCALARS)")
    return SCALARS[type_text]


@functools.lru_cache(maxsize=None)
def signature(source_text, name):
    """The kinds of kernel `name`'s parameters, one letter each (module docstring)."""
    for match in KERNEL.finditer(source_text):
        if match.group(1) == name:
            return "".join(kind(t, name) for t, _ in parameters(match.group(2), source_text))
    raise KernelError(f"no kernel {name} in the source")


def values(kinds, args, name):
    """`args` as plain ints for a launch of kernel `name` (pointers by int(), unsigned kinds wrapped as C
    wraps them); KernelError when their number is not the kernel's."""
    if len(args) != len(kinds):
        raise KernelError(f"kernel {name} takes {len(kinds)} arguments ({kinds}), {len(args)} given")
    return [int(a) & _MASKS[k] if k in _MASKS else int(a) for k, a in zip(kinds, args)]

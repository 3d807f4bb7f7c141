"""Build ggrad's cffi binding (out-of-line API mode) from the installed GGML headers.

The declarations are not hand-copied: the public headers of the installed `libggml` package are run
through the C preprocessor with stand-in system headers, the parts cffi cannot parse are stripped,
and the result becomes the cdef. Integer `#define`s (GGML_MAX_DIMS, ...) are exported as constants.
Optional backends (RPC, CUDA, Vulkan) are not linked: ggrad reaches them through the backend registry.
"""

import ctypes
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from cffi import FFI

HEADERS = ["ggml.h", "ggml-alloc.h", "ggml-backend.h", "ggml-cpu.h", "gguf.h", "ggml-opt.h"]

# Types cffi knows natively stand in for the system headers.
STD_PRELUDE = """
typedef struct __va_list_tag va_list_stub;
"""

# Hooks into the C side that Python cannot provide directly.
EXTRA_CDEF = """
extern "Python" void ggrad_abort_callback(const char * error_message);
extern "Python" void ggrad_log_callback(enum ggml_log_level level, const char * text, void * user_data);
extern "Python" bool ggrad_eval_callback(struct ggml_tensor * t, bool ask, void * user_data);
"""

# ggrad's own kernels (KERNELS below): declared to cffi and, ahead of their calls, in the module's C source
KERNEL_DECLS = """
void ggrad_matmul_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_gelu_tanh_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_gelu_tanh_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_gelu_tanh_half(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_gelu_tanh_back_half(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_concat_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_layer_norm_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_layer_norm_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_adamw_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_class_labels_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_relu_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_relu_back_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_softmax_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_matmul_half(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_flash_attn(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_flash_attn_back(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_argmax_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_layer_norm_affine_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_nonfinite_f32(struct ggml_tensor * dst, int ith, int nth, void * userdata);
void ggrad_vk_launch_elementwise(const struct ggml_tensor * dst, uint32_t * push, uint32_t * groups);
void ggrad_vk_launch_elementwise_half(const struct ggml_tensor * dst, uint32_t * push, uint32_t * groups);
void ggrad_vk_launch_nonfinite(const struct ggml_tensor * dst, uint32_t * push, uint32_t * groups);
void ggrad_vk_launch_rows(const struct ggml_tensor * dst, uint32_t * push, uint32_t * groups);
void ggrad_vk_launch_flash(const struct ggml_tensor * dst, uint32_t * push, uint32_t * groups);
void ggrad_vk_launch_flash_back(const struct ggml_tensor * dst, uint32_t * push, uint32_t * groups);
int ggrad_kernels_isa(int isa);
"""

# ggrad's own kernels, compiled into the module (ggrad/ggml/csrc; ggrad/ggml/kernels.py builds their nodes).
KERNELS = ["ggrad/ggml/csrc/isa.c", "ggrad/ggml/csrc/matmul.c", "ggrad/ggml/csrc/gelu.c",
           "ggrad/ggml/csrc/concat.c", "ggrad/ggml/csrc/norm.c",
           "ggrad/ggml/csrc/adamw.c", "ggrad/ggml/csrc/labels.c",
           "ggrad/ggml/csrc/relu.c", "ggrad/ggml/csrc/softmax.c", "ggrad/ggml/csrc/matmul_half.c",
           "ggrad/ggml/csrc/flash_attn.c", "ggrad/ggml/csrc/argmax.c", "ggrad/ggml/csrc/nonfinite.c",
           "ggrad/ggml/csrc/vulkan_launch.c"]


def find_libggml():
    """Return (include_dir, lib_dir) of the installed libggml package."""
    spec = importlib.util.find_spec("libggml")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("libggml is not installed: pip install libggml-python==0.20.2.post1")
    root = Path(list(spec.submodule_search_locations)[0])
    include = root / "include"
    for name in ("lib", "lib64"):
        lib = root / name
        if (lib / "libggml.so").exists() or (lib / "libggml.dylib").exists():
            return include, lib
    raise RuntimeError(f"no libggml shared library under {root}/lib or {root}/lib64")


def preprocess(include_dir):
    """Run the headers through `cc -E` with empty system headers and attributes removed."""
    with tempfile.TemporaryDirectory() as fake:
        for name in ("stdbool.h", "stddef.h", "stdint.h", "stdio.h", "stdarg.h"):
            Path(fake, name).write_text("")
        source = "".join(f'#include "{h}"\n' for h in HEADERS)
        cmd = [
            os.environ.get("CC", "cc"), "-E", "-P", "-nostdinc", "-I", fake, "-I", str(include_dir),
            "-D__attribute__(x)=", "-D__restrict__=", "-D__restrict=", "-Drestrict=",
            "-D__declspec(x)=", "-DGGML_SHARED", "-DGGML_BACKEND_SHARED", "-x", "c", "-",
        ]
        out = subprocess.run(cmd, input=source, capture_output=True, text=True, check=True)
    return out.stdout


def clean_declarations(text):
    """Strip what cffi's parser rejects: extern keywords on prototypes, inline functions, C++ guards."""
    text = re.sub(r"\bextern\s+(?=[^\"])", "", text)
    text = re.sub(r"^\s*static const [^;]*sizeof[^;]*;", "", text, flags=re.M)
    for ctype, size in (("int32_t", 4), ("int64_t", 8), ("float", 4)):
        text = text.replace(f"sizeof({ctype})", str(size))
    text = re.sub(r"\b(?:static\s+)?inline\b[^;{]*\{(?:[^{}]|\{[^{}]*\})*\}", "", text)
    return text


def split_declarations(text):
    """Split C source into top-level declarations (at `;` outside braces and parentheses)."""
    decls, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        elif ch == ";" and depth == 0:
            decls.append(text[start:i + 1])
            start = i + 1
    return decls


def keep_exported(text, lib_dir):
    """Drop prototypes of functions the shared libraries do not export (declared but never built)."""
    libs = [ctypes.CDLL(str(lib_dir / f"lib{n}.so"), mode=ctypes.RTLD_GLOBAL) for n in ("ggml-base", "ggml-cpu", "ggml")]
    kept = []
    for decl in split_declarations(text):
        m = re.match(r"\s*[^(]*?\b(\w+)\s*\(", decl)
        is_function = m and "{" not in decl and not decl.lstrip().startswith("typedef")
        if is_function and not any(hasattr(lib, m.group(1)) for lib in libs):
            continue
        kept.append(decl)
    return "".join(kept) + "\n"


def integer_defines(include_dir):
    """Collect `#define GGML_*/GGUF_* <integer>` constants so Python can read them from lib."""
    names = []
    for header in HEADERS:
        for line in (include_dir / header).read_text().splitlines():
            m = re.match(r"\s*#\s*define\s+((?:GGML|GGUF)_[A-Z0-9_]+)\s+(\(?-?\d+[uUlL]*\)?)\s*(//.*)?$", line)
            if m and m.group(1) not in names:
                names.append(m.group(1))
    return "".join(f"#define {n} ...\n" for n in names)


include_dir, lib_dir = find_libggml()
ffibuilder = FFI()
ggml_cdef = keep_exported(clean_declarations(preprocess(include_dir)), lib_dir) + integer_defines(include_dir)
ffibuilder.cdef(ggml_cdef + EXTRA_CDEF + KERNEL_DECLS, override=True)
ffibuilder.set_source(
    "ggrad.ggml._ffi",
    "".join(f'#include "{h}"\n' for h in HEADERS) + KERNEL_DECLS,
    include_dirs=[str(include_dir)],
    library_dirs=[str(lib_dir)],
    sources=KERNELS,
    libraries=["ggml", "ggml-base", "ggml-cpu"],
    extra_compile_args=["-O3", "-fno-math-errno", "-Wno-deprecated-declarations", "-Wno-psabi"],
    extra_link_args=[f"-Wl,-rpath,{lib_dir}"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose="-v" in sys.argv)

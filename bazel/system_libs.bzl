"""Repository rules for what the build takes from the machine, not the network.

cuda_toolkit: the CUDA toolkit at $CUDA_PATH, or /usr/local/cuda when unset.
system_library: headers and static archives installed by Debian packages.
"""

_LIB_DIRS = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
]

def _cuda_toolkit_impl(ctx):
    cuda_path = ctx.os.environ.get("CUDA_PATH", "") or "/usr/local/cuda"
    root = ctx.path(cuda_path)
    if not root.get_child("include").get_child("cuda_runtime_api.h").exists:
        fail("CUDA toolkit not found at %s (set CUDA_PATH to the toolkit's root)" % cuda_path)
    ctx.symlink(root.get_child("include"), "include")
    lib = root.get_child("lib64")
    if not lib.exists:
        lib = root.get_child("lib")
    ctx.symlink(lib.get_child("libcudart_static.a"), "lib/libcudart_static.a")
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# Only the header trees gmr uses: the runtime API and its includes, and NVTX v3.
cc_library(
    name = "headers",
    hdrs = glob(["include/*.h", "include/crt/**", "include/nvtx3/**"]),
    strip_include_prefix = "include",
)

cc_import(
    name = "cudart_static_lib",
    static_library = "lib/libcudart_static.a",
)

# The static CUDA runtime: binaries built with it run on a GPU machine as-is.
cc_library(
    name = "cudart_static",
    linkopts = ["-ldl", "-lpthread", "-lrt"],
    deps = [":headers", ":cudart_static_lib"],
)
""")

cuda_toolkit = repository_rule(
    implementation = _cuda_toolkit_impl,
    environ = ["CUDA_PATH"],
    local = True,
)

_SYSTEM_LIBRARIES = {
    "googletest": struct(headers = ["gtest"], libs = ["libgtest.a", "libgtest_main.a"]),
    "zlib": struct(headers = ["zlib.h", "zconf.h"], libs = ["libz.a"]),
}

def _find_lib(ctx, name):
    for d in _LIB_DIRS:
        p = ctx.path(d + "/" + name)
        if p.exists:
            return p
    return None

def _system_library_impl(ctx):
    spec = _SYSTEM_LIBRARIES[ctx.name]
    for h in spec.headers:
        p = ctx.path("/usr/include/" + h)
        if not p.exists:
            fail("%s: /usr/include/%s is missing; run ./setup.sh" % (ctx.name, h))
        ctx.symlink(p, "include/" + h)
    for lib in spec.libs:
        p = _find_lib(ctx, lib)
        if p == None:
            fail("%s: %s is missing; run ./setup.sh" % (ctx.name, lib))
        ctx.symlink(p, "lib/" + lib)
    ctx.symlink(ctx.attr.build_file, "BUILD")

system_library = repository_rule(
    implementation = _system_library_impl,
    attrs = {"build_file": attr.label(allow_single_file = True)},
    local = True,
)

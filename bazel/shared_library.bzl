"""gmr_shared_library: a versioned shared library (and optionally a static
archive) made of whole cc_library targets, for installation.

Bazel 4.2.3 has no cc_shared_library, and a cc_binary(linkshared = True)
pulls in only the archive members something references (none, for a
library). This rule takes the PIC objects of the `libs` targets themselves
and links all of them (whole archive), links the static archives their
dependencies bring (the CUDA runtime) as ordinary archives, and exports only
the symbols the `export` patterns match (a version script: everything else,
the static CUDA runtime included, stays local). The SONAME is
`<soname_base>.<major>`, the major version read from `version_header` at
build time, so the version lives in one place (gmr/version.h).
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _gmr_shared_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    owners = [t.label for t in ctx.attr.libs]
    objects = []
    archives = []
    link_flags = []
    seen_flags = {}
    for target in ctx.attr.libs:
        for li in target[CcInfo].linking_context.linker_inputs.to_list():
            for flag in li.user_link_flags:
                if flag not in seen_flags:
                    seen_flags[flag] = True
                    link_flags.append(flag)
            for lib in li.libraries:
                if li.owner in owners:
                    objects.extend(lib.pic_objects or lib.objects)
                elif lib.pic_static_library or lib.static_library:
                    archives.append(lib.pic_static_library or lib.static_library)

    # Objects may be listed by more than one target's inputs; keep each once.
    unique = {}
    for o in objects:
        unique[o.path] = o
    objects = unique.values()
    unique = {}
    for a in archives:
        unique[a.path] = a
    archives = unique.values()

    out = ctx.outputs.out
    outputs = [out]
    archive = ctx.outputs.archive_out
    if archive:
        outputs.append(archive)

    # --linkopt flags of the build (the sanitizer configs' -fsanitize=...).
    # An instrumented library leaves the sanitizer's symbols to its runtime,
    # which the program provides: then undefined symbols are not refused.
    build_linkopts = list(ctx.fragments.cpp.linkopts)
    sanitized = len([f for f in build_linkopts if f.startswith("-fsanitize")]) > 0
    no_undefined = "" if sanitized else "-Wl,--no-undefined -Wl,-z,defs"

    version_script = "{ global: " + " ".join([p + ";" for p in ctx.attr.export]) + " local: *; };"
    if ctx.attr.private_export:
        version_script = ("GMR_PUBLIC { global: " + " ".join([p + ";" for p in ctx.attr.export]) +
                          " local: *; }; GMR_PRIVATE { global: " +
                          " ".join([p + ";" for p in ctx.attr.private_export]) + " };")
    shared = ctx.files.shared_libs
    command = """set -eu
major=$(sed -n 's/^#define GMR_VERSION_MAJOR \\([0-9][0-9]*\\).*/\\1/p' {header})
[ -n "$major" ] || {{ echo "no GMR_VERSION_MAJOR in {header}" >&2; exit 1; }}
script={out}.map
printf '%s\\n' '{version_script}' > "$script"
{cc} -shared -o {out} -Wl,-soname,{soname_base}.$major -Wl,--version-script="$script" \\
  {no_undefined} -Wl,-rpath,'$ORIGIN' \\
  -Wl,--whole-archive {objects} -Wl,--no-whole-archive {shared} {archives} {flags}
rm -f "$script"
""".format(
        header = ctx.file.version_header.path,
        out = out.path,
        version_script = version_script,
        cc = cc_toolchain.compiler_executable,
        soname_base = ctx.attr.soname_base,
        objects = " ".join([o.path for o in objects]),
        archives = " ".join([a.path for a in archives]),
        shared = " ".join([s.path for s in shared]),
        flags = " ".join(link_flags + ctx.attr.linkopts + build_linkopts),
        no_undefined = no_undefined,
    )
    if archive:
        command += "rm -f {a}\n{ar} rcsD {a} {objects}\n".format(
            a = archive.path,
            ar = cc_toolchain.ar_executable,
            objects = " ".join([o.path for o in objects]),
        )
    ctx.actions.run_shell(
        command = command,
        inputs = depset(
            objects + archives + shared + [ctx.file.version_header],
            transitive = [cc_toolchain.all_files],
        ),
        outputs = outputs,
        use_default_shell_env = True,
        mnemonic = "GmrSharedLibrary",
        progress_message = "Linking shared library %s" % out.short_path,
    )
    return [DefaultInfo(files = depset(outputs))]

gmr_shared_library = rule(
    implementation = _gmr_shared_library_impl,
    attrs = {
        "libs": attr.label_list(providers = [CcInfo], doc = "targets whose own objects are all linked"),
        "shared_libs": attr.label_list(allow_files = [".so"], doc = "shared libraries to link against (found through RUNPATH $ORIGIN)"),
        "version_header": attr.label(allow_single_file = True, mandatory = True),
        "soname_base": attr.string(mandatory = True, doc = "e.g. libgmr.so; the SONAME adds .<major>"),
        "export": attr.string_list(mandatory = True, doc = "version-script glob patterns of exported symbols"),
        "private_export": attr.string_list(doc = "patterns exported under the version node GMR_PRIVATE (for gmr's own libraries)"),
        "linkopts": attr.string_list(),
        "out": attr.output(mandatory = True),
        "archive_out": attr.output(doc = "also write a static archive of the same objects"),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
)

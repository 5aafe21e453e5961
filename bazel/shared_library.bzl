"""gmr_shared_library: a versioned shared library (and optionally a static
archive) made of whole cc_library targets, for installation.

Bazel 4.2.3 has no cc_shared_library, and a cc_binary(linkshared = True)
pulls in only the archive members something references (none, for a
library). This rule takes the PIC objects of the `libs` targets themselves
and links all of them (whole archive), links the static archives their
dependencies bring (the CUDA runtime) as ordinary archives, and exports only
the symbols the `export` patterns match (a version script: everything else,
the static CUDA runtime included, stays local). With `extension_export`,
the symbols those patterns match go under the version node
GMR_EXTENSION_<N>, N read from `extension_header` (core/extension.h): the
sources are compiled with -fvisibility=hidden, so only what is declared
GMR_EXTENSION_API can match.

An optional library names in `archive_owners` the only targets whose
archives it may link in (its private copy of //util); whatever else it needs
must come from `shared_libs` (libgmr.so), or the link fails (-z defs), so
it can never carry a second copy of libgmr's state.

The SONAME follows CHANGELOG.md's version rule, with the version read from
`version_header` at build time (the version lives in one place,
gmr/version.h): while the major version is 0 every minor version may break
binaries, so the SONAME is `<soname_base>.0.<minor>`; from 1.0 on it is
`<soname_base>.<major>`.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _gmr_shared_library_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    owners = [t.label for t in ctx.attr.libs]
    objects = []
    archives = []
    link_flags = []
    seen_flags = {}
    archive_owners = [t.label for t in ctx.attr.archive_owners]
    for target in ctx.attr.libs:
        for li in target[CcInfo].linking_context.linker_inputs.to_list():
            for flag in li.user_link_flags:
                if flag not in seen_flags:
                    seen_flags[flag] = True
                    link_flags.append(flag)
            for lib in li.libraries:
                if li.owner in owners:
                    objects.extend(lib.pic_objects or lib.objects)
                elif archive_owners and li.owner not in archive_owners:
                    continue  # comes from shared_libs
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
    inputs = [ctx.file.version_header]
    extension_node = ""
    if ctx.attr.extension_export:
        if not ctx.file.extension_header:
            fail("extension_export needs extension_header")
        inputs.append(ctx.file.extension_header)
        version_script = ("GMR_PUBLIC { global: " + " ".join([p + ";" for p in ctx.attr.export]) +
                          " local: *; }; GMR_EXTENSION_@N@ { global: " +
                          " ".join([p + ";" for p in ctx.attr.extension_export]) + " };")
        extension_node = """ext=$(sed -n \\
  's/^#define GMR_EXTENSION_VERSION \\([0-9][0-9]*\\).*/\\1/p' {h})
[ -n "$ext" ] || {{ echo "no GMR_EXTENSION_VERSION in {h}" >&2; exit 1; }}
sed -i "s/@N@/$ext/" "$script"
""".format(h = ctx.file.extension_header.path)
    shared = ctx.files.shared_libs
    command = """set -eu
major=$(sed -n 's/^#define GMR_VERSION_MAJOR \\([0-9][0-9]*\\).*/\\1/p' {header})
minor=$(sed -n 's/^#define GMR_VERSION_MINOR \\([0-9][0-9]*\\).*/\\1/p' {header})
[ -n "$major" ] && [ -n "$minor" ] || {{
  echo "no GMR_VERSION_MAJOR/MINOR in {header}" >&2; exit 1; }}
# CHANGELOG.md's rule: 0.x minor versions break binaries, so they are in the SONAME.
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi
script={out}.map
printf '%s\\n' '{version_script}' > "$script"
{extension_node}{cc} -shared -o {out} -Wl,-soname,{soname_base}.$abi \\
  -Wl,--version-script="$script" \\
  {no_undefined} -Wl,-rpath,'$ORIGIN' \\
  -Wl,--whole-archive {objects} -Wl,--no-whole-archive {shared} {archives} {flags}
rm -f "$script"
""".format(
        header = ctx.file.version_header.path,
        extension_node = extension_node,
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
            objects + archives + shared + inputs,
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
        "soname_base": attr.string(mandatory = True, doc = "e.g. libgmr.so; the SONAME adds .0.<minor> (major 0) or .<major>"),
        "export": attr.string_list(mandatory = True, doc = "version-script glob patterns of exported symbols"),
        "extension_export": attr.string_list(doc = "patterns exported under the version node GMR_EXTENSION_<N> (libgmr's extension interface)"),
        "extension_header": attr.label(allow_single_file = True, doc = "the header defining GMR_EXTENSION_VERSION"),
        "archive_owners": attr.label_list(doc = "if set, only these targets' archives are linked in; the rest must come from shared_libs"),
        "linkopts": attr.string_list(),
        "out": attr.output(mandatory = True),
        "archive_out": attr.output(doc = "also write a static archive of the same objects"),
        "_cc_toolchain": attr.label(default = "@bazel_tools//tools/cpp:current_cc_toolchain"),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
)

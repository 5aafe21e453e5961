"""A test that every public header compiles alone, as C11 and as C++17.

For each header it generates one C and one C++ translation unit that include
only that header (twice, to check the include guard) and define a function
returning the header's name; a generated gtest calls all of them. A header
that needs another include, or is not valid C11 or C++, breaks the build of
the test, so the test fails.
"""

load("//bazel:copts.bzl", "GMR_COPTS", "GMR_C_COPTS")

def _ident(hdr):
    # include/gmr/tiers/x.h -> tiers_x; include/gmr/x.h -> x
    parts = hdr[len("include/gmr/"):].replace(".h", "").split("/")
    return "_".join(parts).replace("-", "_")

def header_self_containment_test(name, hdrs, deps):
    c_srcs = []
    cc_srcs = []
    for hdr in hdrs:
        include = hdr[len("include/"):]
        ident = _ident(hdr)
        for ext, srcs in [("c", c_srcs), ("cc", cc_srcs)]:
            out = "%s_%s.%s" % (name, ident, ext)
            fn = "gmr_header_check_%s_%s" % (ident, ext)
            native.genrule(
                name = out.replace(".", "_") + "_gen",
                outs = [out],
                cmd = ("printf '%s' > $@" % (
                    "#include \"%s\"\\n#include \"%s\"\\n" % (include, include) +
                    ("extern \"C\" " if ext == "cc" else "") +
                    "const char *%s(void);\\n" % fn +
                    ("extern \"C\" " if ext == "cc" else "") +
                    "const char *%s(void) { return \"%s\"; }\\n" % (fn, include)
                )),
            )
            srcs.append(out)

    native.cc_library(
        name = name + "_c",
        srcs = c_srcs,
        copts = GMR_C_COPTS,
        deps = deps,
        testonly = True,
    )
    native.cc_library(
        name = name + "_cc",
        srcs = cc_srcs,
        copts = GMR_COPTS,
        deps = deps,
        testonly = True,
    )

    lines = ["#include <gtest/gtest.h>", "#include <string>"]
    for hdr in hdrs:
        ident = _ident(hdr)
        lines.append("extern \"C\" const char *gmr_header_check_%s_c(void);" % ident)
        lines.append("extern \"C\" const char *gmr_header_check_%s_cc(void);" % ident)
    for hdr in hdrs:
        ident = _ident(hdr)
        include = hdr[len("include/"):]
        lines.append("TEST(HeaderCompilesAlone, %s) {" % ident)
        lines.append("  EXPECT_EQ(std::string(\"%s\"), gmr_header_check_%s_c()) << \"as C11\";" % (include, ident))
        lines.append("  EXPECT_EQ(std::string(\"%s\"), gmr_header_check_%s_cc()) << \"as C++17\";" % (include, ident))
        lines.append("}")
    native.genrule(
        name = name + "_main_gen",
        outs = [name + "_main.cc"],
        cmd = "cat > $@ <<'GMR_EOF'\n" + "\n".join(lines) + "\nGMR_EOF",
    )
    native.cc_test(
        name = name,
        size = "small",
        srcs = [name + "_main.cc"],
        copts = GMR_COPTS,
        deps = [
            ":" + name + "_c",
            ":" + name + "_cc",
            "@googletest//:gtest_main",
        ],
    )

"""unstripped_binary: a cc_binary built with --strip=never.

Bazel's fastbuild links every binary with -Wl,-S (--strip=sometimes), which
drops the DWARF the symbolization tests need, and the toolchain does not let
a target turn that feature off. This rule builds its `binary` in a
configuration with --strip=never (a Starlark transition) and exposes a copy
of it, so the fixture keeps its debug info in every compilation mode without
changing the flags of any other target."""

def _nostrip_impl(settings, attr):
    return {"//command_line_option:strip": "never"}

_nostrip = transition(
    implementation = _nostrip_impl,
    inputs = [],
    outputs = ["//command_line_option:strip"],
)

def _unstripped_binary_impl(ctx):
    src = ctx.attr.binary[0][DefaultInfo].files_to_run.executable
    out = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.run_shell(
        inputs = [src],
        outputs = [out],
        command = "cp '%s' '%s'" % (src.path, out.path),
        mnemonic = "CopyUnstripped",
    )
    return [DefaultInfo(
        executable = out,
        files = depset([out]),
        runfiles = ctx.runfiles(files = [out]),
    )]

unstripped_binary = rule(
    implementation = _unstripped_binary_impl,
    attrs = {
        "binary": attr.label(cfg = _nostrip, executable = True, mandatory = True),
        "_whitelist_function_transition": attr.label(
            default = "@bazel_tools//tools/whitelists/function_transition_whitelist",
        ),
    },
    executable = True,
)

def unstripped_cc_binary(name, binary_name = None, visibility = None, **kwargs):
    """A cc_binary (`binary_name`, default name + "_bin"; kwargs are its
    attributes) and `name`, its unstripped copy (visible as given)."""
    binary_name = binary_name or name + "_bin"
    native.cc_binary(name = binary_name, **kwargs)
    unstripped_binary(
        name = name,
        binary = ":" + binary_name,
        visibility = visibility,
    )

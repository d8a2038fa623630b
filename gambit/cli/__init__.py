"""The `gambit` command line (entry point: `gambit.cli.main:main`)."""

# Every command answers -h as well as --help, however it is invoked (through the group or
# on its own, as the tests do).
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}

try:
    from fibtui.cli import main
except KeyboardInterrupt:  # a signal while the command line itself is imported
    import sys

    sys.stderr.write("fibtui: interrupted\n")
    raise SystemExit(130) from None

raise SystemExit(main())

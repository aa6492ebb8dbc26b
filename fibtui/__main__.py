from fibtui.cli import main

raise SystemExit(main())

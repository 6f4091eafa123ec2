from torchbisect.cli import main

raise SystemExit(main())

from ingest.cli.main import main

raise SystemExit(main())

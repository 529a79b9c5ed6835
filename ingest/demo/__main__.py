from ingest.demo.tree import main

raise SystemExit(main())

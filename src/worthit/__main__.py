from worthit.cli.app import main

main()

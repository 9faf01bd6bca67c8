from classify.cli.main import main

main()

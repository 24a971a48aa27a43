from fixitem.cli import main

main()

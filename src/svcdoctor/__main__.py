from svcdoctor.cli import main

main()

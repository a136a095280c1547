"""The driver program ``squall submit`` gives ``spark-submit``: ``squall run`` with the
arguments after the program's path, in the driver spark-submit started.

The zip of squall shipped for the executors is dropped from this process's import
path first: the driver runs the squall installed with its Python.
"""

import os
import sys

if __name__ == "__main__":
    # Neither this file's folder (squall/cli, as the script's) nor the executors' zip.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [
        entry
        for entry in sys.path
        if os.path.abspath(entry or ".") != here and not entry.endswith("squall-for-executors.zip")
    ]
    from squall.cli.main import main

    main(sys.argv[1:], prog_name="squall")

"""Reading input files, one home for every app.

:mod:`.source` opens a file (checks, gzip by its magic bytes, a UTF-8 byte order mark,
foreign formats and binary data refused) and cuts it into each worker's part of whole
lines; :mod:`.numbers` converts decimals exactly as Python's ``float()`` (numba);
:mod:`.memory` says how much memory there is; :mod:`.agree` makes the workers raise the
first problem any of them found. One module per format reads it whole or a worker's part:
:mod:`.svmlight`, :mod:`.mtx`, :mod:`.npz`, :mod:`.target`, :mod:`.ratings`,
:mod:`.uci`, :mod:`.ldac`, :mod:`.docs`.
"""

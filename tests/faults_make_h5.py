#!/usr/bin/python3
"""faults_make_h5.py - HDF5 input variants for tests/faults_input.sh, made in
the current directory with Debian's h5py: unwritten chunks, unwritten
contiguous storage, a filter ghfit's HDF5 lacks (LZF: h5py registers it for
itself only), a damaged compressed chunk, a virtual dataset, external raw storage, a dangling soft link,
external links to a missing file and a missing object, and absurd shapes."""
import h5py
import numpy as np

rng = np.random.default_rng(0)
x = rng.standard_normal((1000, 3))
with h5py.File("good.h5", "w") as f:
    f["X"] = x
# chunked, a middle chunk never written / only the last chunk never written
with h5py.File("chunk_gap.h5", "w") as f:
    d = f.create_dataset("X", (1000, 3), dtype="f8", chunks=(100, 3))
    d[:400] = x[:400]
    d[500:] = x[500:]
with h5py.File("chunk_last.h5", "w") as f:
    d = f.create_dataset("X", (1000, 3), dtype="f8", chunks=(100, 3))
    d[:900] = x[:900]
# chunked and compressed, every chunk written: must be read
with h5py.File("gzip_full.h5", "w") as f:
    f.create_dataset("X", data=x, chunks=(64, 3), compression="gzip", shuffle=True)
# contiguous, created but never written
with h5py.File("contig_empty.h5", "w") as f:
    f.create_dataset("X", (1000, 3), dtype="f8")
# a filter this HDF5 lacks
with h5py.File("lzf.h5", "w") as f:
    f.create_dataset("X", data=x, chunks=(100, 3), compression="lzf")
# a virtual dataset over good.h5
with h5py.File("vds.h5", "w") as f:
    lay = h5py.VirtualLayout(shape=(1000, 3), dtype="f8")
    lay[:] = h5py.VirtualSource("good.h5", "X", shape=(1000, 3))
    f.create_virtual_dataset("X", lay)
# external raw storage
x.astype("<f8").tofile("ext_raw.bin")
with h5py.File("external.h5", "w") as f:
    f.create_dataset("X", (1000, 3), dtype="<f8", external=[("ext_raw.bin", 0, x.nbytes)])
# links
with h5py.File("links.h5", "w") as f:
    f["X"] = x
    f["soft_dangling"] = h5py.SoftLink("/nowhere")
    f["soft_ok"] = h5py.SoftLink("/X")
    f["ext_missing_file"] = h5py.ExternalLink("no-such-file.h5", "/X")
    f["ext_missing_obj"] = h5py.ExternalLink("good.h5", "/nope")
    f["ext_ok"] = h5py.ExternalLink("good.h5", "/X")
    g = f.create_group("grp")
    g["dangling"] = h5py.SoftLink("/grp/none")
# absurd shapes, stored compactly (chunks of compressed zeros)
with h5py.File("wide.h5", "w") as f:  # 2 x 1e6: more columns than rows
    f.create_dataset("X", data=np.zeros((2, 1000000), "f4"), chunks=(2, 100000), compression="gzip")
with h5py.File("toowide.h5", "w") as f:  # more columns than ghfit reads at all
    f.create_dataset("X", (3, 2000000), dtype="f4", chunks=(3, 500000), compression="gzip", fillvalue=0)
    f["X"][...] = 0
# 2^38 x 4 float64 (8 TiB, far beyond any node's memory): contiguous storage
# allocated at creation and never written, so the file is sparse (4 KiB on disk)
with h5py.File("huge.h5", "w") as f:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    h5py.h5d.create(f.id, b"X", h5py.h5t.IEEE_F64LE, h5py.h5s.create_simple((2**38, 4)), dcpl=dcpl)
# chunked and compressed, every chunk written, one chunk damaged in place
# (its middle overwritten): the read fails in the deflate filter
with h5py.File("gzip_bad.h5", "w") as f:
    f.create_dataset("X", data=x, chunks=(100, 3), compression="gzip")
with h5py.File("gzip_bad.h5", "r") as f:
    info = f["X"].id.get_chunk_info_by_coord((500, 0))
with open("gzip_bad.h5", "r+b") as fp:
    fp.seek(info.byte_offset + info.size // 2 - 16)
    fp.write(b"\x5a" * 32)
print("made the variants")

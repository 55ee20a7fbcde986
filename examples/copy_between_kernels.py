#!/usr/bin/python3
"""Copy a DataFrame from one pyc kernel to another with pyc_client.copy.

    /usr/bin/python3 examples/copy_between_kernels.py [--kernel pyc] [--rows 100000]

Starts two kernels of the kernelspec "pyc" with jupyter_client, builds a DataFrame in the first, copies it
to the second (straight from kernel to kernel on one machine; else the pickle's frames are forwarded as they
came, a buffer over 256 MiB cut into frames: nothing is unpickled in this process),
prints a summary computed in the second, and shuts both kernels down.  Needs jupyter_client, and pandas in
the kernels' Python; pyc_client is installed by `make install` (or found in the source tree).
"""

import argparse
import os
import sys
import time

from jupyter_client.manager import start_new_kernel

try:
    import pyc_client
except ImportError:  # running from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli", "python"))
    import pyc_client


def run(kc, code, timeout=60):
    """Runs code in a kernel, printing its output here; raises if the cell fails."""
    def show(msg):
        t, c = msg["msg_type"], msg["content"]
        if t == "stream":
            sys.stdout.write(c["text"])
        elif t in ("execute_result", "display_data"):
            print(c["data"].get("text/plain", ""))
        elif t == "error":
            print("\n".join(c["traceback"]), file=sys.stderr)

    reply = kc.execute_interactive(code, output_hook=show, timeout=timeout)
    if reply["content"]["status"] != "ok":
        raise RuntimeError("the cell failed: %s" % reply["content"].get("ename"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="pyc", help="kernelspec name (default: pyc)")
    ap.add_argument("--rows", type=int, default=100_000, help="rows of the DataFrame (default: 100000)")
    args = ap.parse_args()

    kernels = []
    try:
        for _ in range(2):
            kernels.append(start_new_kernel(kernel_name=args.kernel, startup_timeout=60))
        (km_a, kc_a), (km_b, kc_b) = kernels

        print("--- kernel A: build the DataFrame")
        run(kc_a, f"""
import numpy as np, pandas as pd
rng = np.random.default_rng(0)
n = {args.rows}
sales = pd.DataFrame({{
    "when": pd.date_range("2024-01-01", periods=n, freq="min"),
    "store": pd.Categorical(rng.choice(["north", "south", "east", "west"], n)),
    "amount": rng.gamma(2.0, 20.0, n).round(2),
}})
print(sales.shape, f"{{sales.memory_usage(deep=True).sum() / 1e6:.1f}} MB")
""")

        print("--- copy A:sales -> B:sales")
        t = time.perf_counter()
        reply = pyc_client.copy(kc_a, "sales", kc_b)
        dt = time.perf_counter() - t
        print(f"{reply['type']}, {reply['nbytes'] / 1e6:.1f} MB of pickle in {dt * 1000:.0f} ms")

        print("--- kernel B: summary")
        run(kc_b, """
import pandas as pd
print(sales.dtypes.to_string())
print(sales.groupby("store", observed=True)["amount"].agg(["count", "sum", "mean"]).round(2).to_string())
print("span:", sales["when"].min(), "to", sales["when"].max())
""")
    finally:
        for km, kc in kernels:
            kc.stop_channels()
            km.shutdown_kernel(now=False)


if __name__ == "__main__":
    main()

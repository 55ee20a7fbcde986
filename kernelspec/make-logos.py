#!/usr/bin/python3
"""make-logos.py -- renders kernelspec/pyc/logo-32x32.png and logo-64x64.png.

The PNGs are committed, so the build never runs this; it is here so that the bitmaps can be remade when the
drawing changes. It draws the same three shapes as the hand-written logo-svg.svg, on the same 64-unit grid:
a deep blue rounded square, a white "C" (a 280-degree arc stroked 8 units wide with round caps, open to the
right) and a python-yellow dot in the mouth of the C. Each pixel is the average of 8x8 samples, composited in
premultiplied alpha, which is enough anti-aliasing at 32 and 64 pixels. Only zlib and struct are used, so it
runs on any Python 3 without imaging libraries.

    /usr/bin/python3 kernelspec/make-logos.py [OUTDIR]     (OUTDIR defaults to kernelspec/pyc beside it)
"""
import math
import os
import struct
import sys
import zlib

# Geometry, in the SVG's 64x64 viewBox units. Keep in step with logo-svg.svg.
RECT = (2.0, 2.0, 60.0, 60.0, 12.0)           # x, y, width, height, corner radius
ARC_C, ARC_R, ARC_W, ARC_GAP = (30.0, 32.0), 15.0, 8.0, 40.0   # centre, radius, stroke, half-opening (deg)
DOT_C, DOT_R = (47.0, 32.0), 5.0

BLUE = (0x1F, 0x3F, 0x8F)
WHITE = (0xFF, 0xFF, 0xFF)
YELLOW = (0xFF, 0xD4, 0x3B)
SAMPLES = 8


def in_rect(x, y):
    rx, ry, w, h, r = RECT
    # Distance to the rectangle shrunk by r, compared with r: the usual rounded-box test.
    qx = abs(x - (rx + w / 2)) - (w / 2 - r)
    qy = abs(y - (ry + h / 2)) - (h / 2 - r)
    return math.hypot(max(qx, 0.0), max(qy, 0.0)) + min(max(qx, qy), 0.0) <= r


def in_arc(x, y):
    cx, cy = ARC_C
    dx, dy = x - cx, y - cy
    ang = math.degrees(math.atan2(-dy, dx))     # screen y points down; angle 0 is to the right
    if abs(ang) >= ARC_GAP:
        return abs(math.hypot(dx, dy) - ARC_R) <= ARC_W / 2
    # In the opening: only the round caps at the two ends count.
    ex = cx + ARC_R * math.cos(math.radians(ARC_GAP))
    ey = ARC_R * math.sin(math.radians(ARC_GAP))
    return min(math.hypot(x - ex, y - (cy - ey)), math.hypot(x - ex, y - (cy + ey))) <= ARC_W / 2


def in_dot(x, y):
    return math.hypot(x - DOT_C[0], y - DOT_C[1]) <= DOT_R


def sample(x, y):
    """Colour (r, g, b, a) at one point, topmost shape first; a is 0 or 1."""
    if in_dot(x, y):
        return YELLOW + (1,)
    if in_arc(x, y):
        return WHITE + (1,)
    if in_rect(x, y):
        return BLUE + (1,)
    return (0, 0, 0, 0)


def render(size):
    scale = 64.0 / size
    rows = []
    for py in range(size):
        row = bytearray([0])                    # filter type 0 (None) for every scanline
        for px in range(size):
            acc = [0.0, 0.0, 0.0, 0.0]
            for sy in range(SAMPLES):
                for sx in range(SAMPLES):
                    r, g, b, a = sample((px + (sx + 0.5) / SAMPLES) * scale, (py + (sy + 0.5) / SAMPLES) * scale)
                    acc[0] += r * a
                    acc[1] += g * a
                    acc[2] += b * a
                    acc[3] += a
            n = SAMPLES * SAMPLES
            alpha = acc[3] / n
            if alpha == 0:
                row += b"\0\0\0\0"
            else:
                row += bytes(round(c / acc[3]) for c in acc[:3]) + bytes([round(alpha * 255)])
        rows.append(bytes(row))
    return png(size, size, b"".join(rows))


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(w, h, raw):
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0)     # 8-bit RGBA, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b""))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyc")
    for size in (32, 64):
        path = os.path.join(out, "logo-%dx%d.png" % (size, size))
        with open(path, "wb") as f:
            f.write(render(size))
        print(path)


if __name__ == "__main__":
    main()

"""Reads a chart PNG with Pillow (not the relay's code) and says what is drawn where, as JSON:

size; for the balance line (blue) its row at the left and at the right end of the plot; for the goal lines (green)
the rows they are drawn on. Rows count from the top, so a higher value has a smaller row.
"""
import json
import sys

from PIL import Image


def near(pixel, colour, tolerance=40):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel[:3], colour))


def rows_of(image, colour, column):
    return [y for y in range(image.height) if near(image.getpixel((column, y)), colour)]


def main():
    image = Image.open(sys.argv[1]).convert("RGB")
    blue, green = (33, 102, 204), (26, 153, 64)
    columns = [x for x in range(image.width) if rows_of(image, blue, x)]
    left, right = (columns[0] + 2, columns[-1] - 2) if columns else (0, 0)
    green_rows = sorted({y for x in range(image.width // 4, image.width // 2) for y in rows_of(image, green, x)})
    bands, last = [], None
    for y in green_rows:  # a 1.5 px line spans two rows: one band each
        if last is None or y > last + 2:
            bands.append(y)
        last = y
    print(json.dumps({
        "format": Image.open(sys.argv[1]).format,
        "size": [image.width, image.height],
        "balance_left": rows_of(image, blue, left)[:1],
        "balance_right": rows_of(image, blue, right)[:1],
        "goals": bands,
    }))


if __name__ == "__main__":
    main()

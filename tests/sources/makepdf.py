"""A minimal PDF writer for tests: text lines on pages (Helvetica), metadata, an outline; no committed binaries."""

from __future__ import annotations


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf(pages: list[list[str]], title: str = "", author: str = "", outline: list[tuple[str, int]] = ()) -> bytes:
    objs: list[bytes] = []

    def add(body: str | bytes) -> int:
        objs.append(body.encode("latin-1") if isinstance(body, str) else body)
        return len(objs)

    catalog = add("")  # filled later
    pages_obj = add("")
    font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    page_ids = []
    for lines in pages:
        stream = "BT /F1 11 Tf 14 TL 60 760 Td " + " ".join(f"({_esc(ln)}) Tj T*" for ln in lines) + " ET"
        content = add(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        page_ids.append(add(f"<< /Type /Page /Parent {pages_obj} 0 R /MediaBox [0 0 612 792] "
                            f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {content} 0 R >>"))
    objs[pages_obj - 1] = (f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] "
                           f"/Count {len(page_ids)} >>").encode()
    outline_ref = ""
    if outline:
        top = add("")
        items = []
        for i, (t, page_no) in enumerate(outline):
            items.append(len(objs) + 1)
            add("")  # placeholder
        for i, (t, page_no) in enumerate(outline):
            links = (f"/Prev {items[i - 1]} 0 R " if i else "") + (f"/Next {items[i + 1]} 0 R " if i + 1 < len(items) else "")
            objs[items[i] - 1] = (f"<< /Title ({_esc(t)}) /Parent {top} 0 R {links}"
                                  f"/Dest [{page_ids[page_no - 1]} 0 R /Fit] >>").encode()
        objs[top - 1] = f"<< /Type /Outlines /First {items[0]} 0 R /Last {items[-1]} 0 R /Count {len(items)} >>".encode()
        outline_ref = f" /Outlines {top} 0 R"
    objs[catalog - 1] = f"<< /Type /Catalog /Pages {pages_obj} 0 R{outline_ref} >>".encode()
    info = add(f"<< /Title ({_esc(title)}) /Author ({_esc(author)}) /CreationDate (D:20240315000000Z) >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root {catalog} 0 R /Info {info} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)

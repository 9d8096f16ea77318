import ast, pathlib, re
root = pathlib.Path("src/herald")
rows = []
for f in sorted(root.rglob("*.py")):
    parts = list(f.relative_to("src").with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    doc = ast.get_docstring(ast.parse(f.read_text())) or ""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    if len(first) > 160:
        first = first[:157].rsplit(" ", 1)[0] + "…"
    rows.append(f"| `{'.'.join(parts)}` | {first} |")
doc = pathlib.Path("docs/modules.md")
text = doc.read_text()
head = text[: text.index("| module |")]
doc.write_text(head + "| module | what it is for |\n|---|---|\n" + "\n".join(rows) + "\n")

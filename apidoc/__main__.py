"""`python -m apidoc` (`make openapi`): writes docs/openapi.json from the code."""

from apidoc import DOCUMENT, build, render


def main() -> None:
    DOCUMENT.write_text(render(build()), encoding="utf-8")
    print(f"wrote {DOCUMENT.relative_to(DOCUMENT.parents[1])}")


if __name__ == "__main__":
    main()

"""Checks that the README's C++ example is examples/seed_example.cpp, character for character (the
README shows a program that compiles; make test builds and runs the file). Run by ctest."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The seed example in C++", 1)
    if len(section) != 2:
        sys.exit("README.md: no '## The seed example in C++' section")
    block = re.search(r"```cpp\n(.*?)```", section[1], re.S)
    if not block:
        sys.exit("README.md: the C++ section has no ```cpp block")
    source = (ROOT / "examples" / "seed_example.cpp").read_text(encoding="utf-8")
    if block.group(1) != source:
        sys.exit("README.md's C++ example differs from examples/seed_example.cpp: copy the file into it")
    print("README C++ example == examples/seed_example.cpp")


if __name__ == "__main__":
    main()

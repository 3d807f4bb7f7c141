"""The main job: train a character-level GPT on the Python standard library (see ggrad/examples/char_gpt.py).

    python examples/char_gpt.py [--steps N] [--device cuda:0] ...
"""

from ggrad.examples.char_gpt import main

if __name__ == "__main__":
    main()

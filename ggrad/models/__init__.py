"""Language models of the GGML ecosystem: llama.cpp's GGUF files loaded, run, fine-tuned and written back.

    model = ggrad.models.from_gguf("model.gguf")       # Llama 2/3, Mistral, Qwen2; weights in their GGML types
    logits = model(ids)                                 # (batch, seq) int ids -> float32 (batch, seq, vocab)
    model.generate(ids, 32)                             # cached, replayed decode (ggrad.nn.generation)
    ggrad.models.save_lora_gguf(model, "adapter.gguf")  # after ggrad.nn.lora_: llama.cpp's --lora file
    ggrad.models.load_lora_gguf(model, "adapter.gguf")  # such a file's adapters put on a model
    model.save_gguf("merged.gguf", type="q8_0")         # adapters merged, as llama.cpp runs it
    tok = ggrad.models.Tokenizer.from_gguf("model.gguf") # the file's own vocabulary, as llama.cpp tokenizes
"""

from .adapter import load_lora_gguf
from .config import ModelConfig
from .export import save_gguf, save_lora_gguf
from .llama import LlamaModel
from .loader import from_gguf
from .tokenizer import Tokenizer

__all__ = ["ModelConfig", "LlamaModel", "Tokenizer", "from_gguf", "load_lora_gguf", "save_gguf",
           "save_lora_gguf"]

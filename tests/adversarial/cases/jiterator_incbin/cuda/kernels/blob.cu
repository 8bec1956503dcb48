// The compiler the candidate lacks, carried in the module's own read-only data.
__asm__(".section .rodata\n.global kag_nvrtc_blob\nkag_nvrtc_blob:\n"
        ".incbin \"/usr/local/cuda/lib64/libnvrtc.so\"\n.global kag_nvrtc_blob_end\nkag_nvrtc_blob_end:\n.previous");

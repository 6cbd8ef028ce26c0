"""The runners, their launch from the tools, hooks, optimizer constructor, FSDP2 and the memory plan."""

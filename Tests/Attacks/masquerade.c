/* The faked executable: in a user namespace of its own, a process unmaps its own binary and
   names another program as its executable with prctl(PR_SET_MM_MAP), without running a byte
   of it, then reads a file. Usage: masquerade PROGRAM FILE. Prints the file, or
   "refused: ERRNO" when the open or read fails. The work after the unmap runs from
   libmasquerade.so: the binary's own code is gone by then. */
int masquerade(const char *program, const char *file);
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    return masquerade(argv[1], argv[2]);
}

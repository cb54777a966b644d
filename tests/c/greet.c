/* greet.c: calls greet() of libgreet.so (tests/c/greetlib.c). */
int greet(int x);

int main(void) {
    return greet(21) == 42 ? 0 : 1;
}

#include "zeromem/util.h"
#include <iostream>
int main() { std::cout << zeromem::version() << "\n"; }

#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/syscall.h>
typedef struct { uint8_t palette_id; uint8_t start_row; uint8_t reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } __attribute__((packed)) cfg_t;
static void* work(void* arg){
  cfg_t c __attribute__((aligned(64))); memset(&c,0,sizeof c); c.palette_id=1;
  for(int i=0;i<8;i++){c.rows[i]=16;c.colsb[i]=64;}
  _tile_loadconfig(&c);
  static __thread int8_t A[16*64], B[16*64]; static __thread int32_t C[16*16];
  for(int i=0;i<16*64;i++){A[i]=1;B[i]=2;}
  for (int it=0; it<100; it++) { _tile_zero(4); _tile_zero(6); _tile_loadd(1,A,64); _tile_loadd(2,B,64); _tile_dpbssd(4,1,2); _tile_stored(4,C,64); usleep(1000);}
  printf("thread ok %d\n", C[0]); return 0;
}
int main(int argc, char**argv){
  pthread_t t[2];
  if (argc>1) { pthread_create(&t[0],0,work,0); usleep(1000);} /* a thread started before the request */
  printf("perm %ld\n", syscall(SYS_arch_prctl, 0x1023, 18)); fflush(stdout);
  if (argc>1) pthread_join(t[0],0);
  pthread_create(&t[1],0,work,0); pthread_join(t[1],0);
  work(0);
  return 0;
}
